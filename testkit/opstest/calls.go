package opstest

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"

	"leases"
	"leases/fence"
	"leases/ops"
	"leases/testkit/fencetest"
)

// BadInput holds every call that names no operation to a one-line
// leases.ErrInvalidInput that changed nothing.
func BadInput(t *testing.T, db fencetest.DB) {
	ctx := fencetest.Context(t)
	table := Setup(t, db, "ops_bad_input")
	good := ops.Call{Resource: "r", Epoch: 1, Key: "k", Request: []byte("a")}
	with := func(change func(c *ops.Call)) ops.Call { c := good; change(&c); return c }
	effect := func(context.Context, *sql.Tx) (ops.Response, error) {
		t.Error("the effect ran for a bad call")
		return ops.Response{}, nil
	}
	before := dump(t, db, table)
	for _, c := range []struct {
		name string
		call func() error
	}{
		{"no resource", func() error { _, err := table.Do(ctx, with(func(c *ops.Call) { c.Resource = "" }), effect); return err }},
		{"epoch 0", func() error { _, err := table.Do(ctx, with(func(c *ops.Call) { c.Epoch = 0 }), effect); return err }},
		{"a negative epoch", func() error { _, _, err := table.Begin(ctx, with(func(c *ops.Call) { c.Epoch = -3 })); return err }},
		{"no key", func() error { _, err := table.Do(ctx, with(func(c *ops.Call) { c.Key = "" }), effect); return err }},
		{"a key of two lines", func() error { _, _, err := table.Begin(ctx, with(func(c *ops.Call) { c.Key = "a\nb" })); return err }},
		{"no effect", func() error { _, err := table.Do(ctx, good, nil); return err }},
		{"complete no pending", func() error { return (*ops.Pending)(nil).Complete(ctx, ops.Response{Status: 200}) }},
		{"a table name with a capital", func() error { _, err := ops.New(db.DB, ops.Options{Dialect: db.Dialect, Table: "Ops"}); return err }},
		{"an unknown dialect", func() error { _, err := ops.New(db.DB, ops.Options{Dialect: fence.Dialect(9)}); return err }},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.call()
			if !errors.Is(err, leases.ErrInvalidInput) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("%v; want one line matching leases.ErrInvalidInput", err)
			}
			if after := dump(t, db, table); after != before {
				t.Fatalf("a bad call changed the tables:\n%s\nwant\n%s", after, before)
			}
		})
	}
}

// dump is every row of the record and its fence table, as text.
func dump(t testing.TB, db fencetest.DB, table *ops.Table) string {
	t.Helper()
	text := func(rows *sql.Rows) (string, error) {
		var line string
		err := rows.Scan(&line)
		return line, err
	}
	records := lines(t, db, `SELECT resource || ' ' || epoch || ' ' || key || ' ' || state FROM `+table.Name()+` WHERE resource <> $1`, "", text)
	fences := lines(t, db, `SELECT resource || ' ' || epoch FROM `+table.Name()+`_fence WHERE resource <> $1`, "", text)
	return strings.Join(append(records, fences...), "\n")
}

// Running shows a retry that arrives while the first call's effect still
// runs: it is answered InProgress at once, without running the effect,
// and once the first call has committed, a Replay. The order comes from
// the effect's handshake: it says when it has begun, and ends when told.
func Running(t *testing.T, db fencetest.DB) {
	ctx := fencetest.Context(t)
	table := Setup(t, db, "ops_running")
	call := ops.Call{Resource: Resource("r"), Epoch: 1, Key: "k", Request: []byte("a")}
	started, release := make(chan struct{}), make(chan struct{})
	effect := Effect(db, table, call, "a")
	type answer struct {
		result ops.Result
		err    error
	}
	first := make(chan answer, 1)
	go func() {
		result, err := table.Do(ctx, call, func(ctx context.Context, tx *sql.Tx) (ops.Response, error) {
			close(started)
			select {
			case <-release:
			case <-ctx.Done():
				return ops.Response{}, ctx.Err()
			}
			return effect(ctx, tx)
		})
		first <- answer{result, err}
	}()
	select {
	case <-started:
	case a := <-first:
		t.Fatalf("the first call answered %+v, %v without running its effect", a.result, a.err)
	}
	again := func(context.Context, *sql.Tx) (ops.Response, error) {
		t.Error("the retry ran the effect")
		return ops.Response{}, nil
	}
	if result, err := table.Do(ctx, call, again); err != nil || result.Outcome != leases.InProgress {
		t.Fatalf("a retry while the first call runs: %+v, %v; want in progress", result, err)
	}
	if p, result, err := table.Begin(ctx, call); err != nil || p != nil || result.Outcome != leases.InProgress {
		t.Fatalf("a Begin while the first call runs: %+v, %v; want in progress", result, err)
	}
	close(release)
	if a := <-first; a.err != nil || a.result.Outcome != leases.Accepted {
		t.Fatalf("the first call: %+v, %v; want accepted", a.result, a.err)
	}
	result, err := table.Do(ctx, call, again)
	if err != nil || result.Outcome != leases.Replay || string(result.Response.Body) != "a" {
		t.Fatalf("the retry after the first call: %+v, %v; want its replay", result, err)
	}
	if got := Effects(t, db, table, call.Resource); len(got) != 1 {
		t.Fatalf("effects %q; want one", got)
	}
}

// Again is the caller's answer to an unknown outcome of call (its
// COMMIT was sent and not answered): the same call again, which the
// record answers.
func Again(ctx context.Context, db fencetest.DB, table *ops.Table, call ops.Call) (ops.Result, error) {
	return table.Do(ctx, call, Effect(db, table, call, string(call.Request)))
}

// CheckRetry holds lost, the error of a first call whose COMMIT was not
// answered, to an unknown outcome, and the answer to Again after it to
// what became of the first: a Replay of it when it committed, else
// Accepted; the effect is in the table once either way.
func CheckRetry(t *testing.T, db fencetest.DB, table *ops.Table, call ops.Call, lost error, committed bool, result ops.Result, err error) {
	t.Helper()
	if !errors.Is(lost, leases.ErrOutcomeUnknown) || leases.IsRefusal(lost) {
		t.Fatalf("a commit without an answer: %v; want leases.ErrOutcomeUnknown", lost)
	}
	want := leases.Accepted
	if committed {
		want = leases.Replay
	}
	if err != nil || result.Outcome != want || string(result.Response.Body) != string(call.Request) {
		t.Fatalf("the retry after an unknown outcome: %+v, %v; want %q with the effect's answer", result, err, want)
	}
	if got := Effects(t, db, table, call.Resource); len(got) != 1 {
		t.Fatalf("effects %q; want one", got)
	}
}
