// Package opstest holds the tests of package leases/ops that every
// database must pass, for each database's test files to run on their own
// connections: the root module's on SQLite, module leases/postgres's on
// a PostgreSQL server.
//
// A test kit: used by tests only, never by shipped code (the library, the
// evidence as cmd/run-experiment links it, the commands).
package opstest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"

	"leases"
	"leases/ops"
	"leases/testkit/fencetest"
)

// Resource is a resource name of its own for each call: the tests of
// one binary share one PostgreSQL server, and -count runs a test again on
// the tables its first run left.
func Resource(name string) string { return fmt.Sprintf("%s #%d", name, runs.Add(1)) }

var runs atomic.Int64

// Setup creates a record called name, and beside it the effects table
// (name + "_effects": resource, epoch, key, value), the rows an effect
// writes in the record's transaction.
func Setup(t testing.TB, db fencetest.DB, name string) *ops.Table {
	t.Helper()
	ctx := fencetest.Context(t)
	table, err := ops.New(db.DB, ops.Options{Dialect: db.Dialect, Table: name})
	if err != nil {
		t.Fatal(err)
	}
	if err := table.Create(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+name+`_effects (
		resource TEXT NOT NULL, epoch BIGINT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return table
}

// Effect is an effect in the database: it stores one row of value in
// the effects table, and answers 201 with value as its body.
func Effect(db fencetest.DB, table *ops.Table, call ops.Call, value string) func(ctx context.Context, tx *sql.Tx) (ops.Response, error) {
	return func(ctx context.Context, tx *sql.Tx) (ops.Response, error) {
		_, err := tx.ExecContext(ctx, db.SQL(`INSERT INTO `+table.Name()+`_effects (resource, epoch, key, value) VALUES ($1, $2, $3, $4)`),
			call.Resource, call.Epoch, call.Key, value)
		if err != nil {
			return ops.Response{}, err
		}
		return ops.Response{Status: 201, Type: "text/plain", Body: []byte(value)}, nil
	}
}

// Effects are the committed effect rows of resource, "epoch/key=value",
// sorted.
func Effects(t testing.TB, db fencetest.DB, table *ops.Table, resource string) []string {
	t.Helper()
	return lines(t, db, `SELECT epoch, key, value FROM `+table.Name()+`_effects WHERE resource = $1`, resource,
		func(rows *sql.Rows) (string, error) {
			var epoch int64
			var key, value string
			err := rows.Scan(&epoch, &key, &value)
			return fmt.Sprintf("%d/%s=%s", epoch, key, value), err
		})
}

// Records are the committed records of resource, "epoch/key state
// status body", sorted.
func Records(t testing.TB, db fencetest.DB, table *ops.Table, resource string) []string {
	t.Helper()
	return lines(t, db, `SELECT epoch, key, state, status, body FROM `+table.Name()+` WHERE resource = $1`, resource,
		func(rows *sql.Rows) (string, error) {
			var epoch int64
			var key, state string
			var status sql.NullInt64
			var body []byte
			err := rows.Scan(&epoch, &key, &state, &status, &body)
			return fmt.Sprintf("%d/%s %s %d %s", epoch, key, state, status.Int64, body), err
		})
}

// lines are the rows of query about resource, each as line renders it,
// sorted.
func lines(t testing.TB, db fencetest.DB, query, resource string, line func(rows *sql.Rows) (string, error)) []string {
	t.Helper()
	rows, err := db.QueryContext(fencetest.Context(t), db.SQL(query), resource)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var found []string
	for rows.Next() {
		l, err := line(rows)
		if err != nil {
			t.Fatal(err)
		}
		found = append(found, l)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(found)
	return found
}

// step is one call of a case: Do (an effect that stores value), Begin,
// Complete of the last Begin, or Do with an effect that fails.
type step struct {
	kind  string // "do", "begin", "complete", "fail"
	epoch int64
	key   string
	req   string // the request, and the effect's value
	want  leases.Outcome
	// newest is the Stale answer's Newest.
	newest int64
	// answer is the Response expected, where it is not the effect's.
	answer *ops.Response
}

func do(epoch int64, key, req string, want leases.Outcome) step {
	return step{kind: "do", epoch: epoch, key: key, req: req, want: want}
}

func begin(epoch int64, key, req string, want leases.Outcome) step {
	return step{kind: "begin", epoch: epoch, key: key, req: req, want: want}
}

func stale(s step, newest int64) step { s.want, s.newest = leases.Stale, newest; return s }

// completed is the answer of the case that completes a pending record.
var completed = &ops.Response{Status: 202, Type: "text/plain", Body: []byte("sent")}

func answered(s step, r *ops.Response) step { s.answer = r; return s }

// Outcomes runs each case's calls on a resource of its own and checks
// every answer, and the effects and records left committed.
func Outcomes(t *testing.T, db fencetest.DB) {
	table := Setup(t, db, "ops_outcomes")
	for _, c := range []struct {
		name    string
		steps   []step
		effects []string
		records []string
	}{
		{"a new key is accepted", []step{do(1, "k", "a", leases.Accepted)},
			[]string{"1/k=a"}, []string{"1/k done 201 a"}},
		{"the same key and request again is a replay, one effect", []step{do(1, "k", "a", leases.Accepted), do(1, "k", "a", leases.Replay)},
			[]string{"1/k=a"}, []string{"1/k done 201 a"}},
		{"the same key with another request is a conflict", []step{do(1, "k", "a", leases.Accepted), do(1, "k", "b", leases.Conflict)},
			[]string{"1/k=a"}, []string{"1/k done 201 a"}},
		{"many keys in one tenure", []step{do(1, "k", "a", leases.Accepted), do(1, "l", "b", leases.Accepted), do(2, "k", "a", leases.Accepted)},
			[]string{"1/k=a", "1/l=b", "2/k=a"}, []string{"1/k done 201 a", "1/l done 201 b", "2/k done 201 a"}},
		{"an epoch below the newest admitted is stale", []step{do(2, "k", "a", leases.Accepted), stale(do(1, "l", "b", ""), 2)},
			[]string{"2/k=a"}, []string{"2/k done 201 a"}},
		{"a replay of an older tenure is stale once a newer epoch was admitted",
			[]step{do(1, "k", "a", leases.Accepted), do(2, "l", "b", leases.Accepted), stale(do(1, "k", "a", ""), 2)},
			[]string{"1/k=a", "2/l=b"}, []string{"1/k done 201 a", "2/l done 201 b"}},
		{"a pending record is in progress", []step{begin(1, "k", "a", leases.Accepted), do(1, "k", "a", leases.InProgress), begin(1, "k", "a", leases.InProgress)},
			nil, []string{"1/k pending 0 "}},
		{"a pending record with another request is a conflict", []step{begin(1, "k", "a", leases.Accepted), do(1, "k", "b", leases.Conflict)},
			nil, []string{"1/k pending 0 "}},
		{"a completed record is a replay", []step{begin(1, "k", "a", leases.Accepted), {kind: "complete"},
			answered(begin(1, "k", "a", leases.Replay), completed), answered(do(1, "k", "a", leases.Replay), completed)},
			nil, []string{"1/k done 202 sent"}},
		{"a begin of an older tenure is stale", []step{do(3, "k", "a", leases.Accepted), stale(begin(2, "k", "a", ""), 3)},
			[]string{"3/k=a"}, []string{"3/k done 201 a"}},
		{"the effect's error rolls back the record", []step{{kind: "fail", epoch: 1, key: "k", req: "a"}, do(1, "k", "a", leases.Accepted)},
			[]string{"1/k=a"}, []string{"1/k done 201 a"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			resource := Resource(c.name)
			run(t, db, table, resource, c.steps)
			if got := Effects(t, db, table, resource); !slices.Equal(got, c.effects) {
				t.Errorf("effects %q; want %q", got, c.effects)
			}
			if got := Records(t, db, table, resource); !slices.Equal(got, c.records) {
				t.Errorf("records %q; want %q", got, c.records)
			}
		})
	}
}

var errEffect = errors.New("the effect failed on purpose")

// run runs steps on resource, checking each answer.
func run(t *testing.T, db fencetest.DB, table *ops.Table, resource string, steps []step) {
	t.Helper()
	ctx := fencetest.Context(t)
	var pending *ops.Pending
	for i, s := range steps {
		call := ops.Call{Resource: resource, Epoch: s.epoch, Key: s.key, Request: []byte(s.req)}
		var result ops.Result
		var err error
		switch s.kind {
		case "do":
			result, err = table.Do(ctx, call, Effect(db, table, call, s.req))
		case "begin":
			var p *ops.Pending
			p, result, err = table.Begin(ctx, call)
			if (p != nil) != (result.Outcome == leases.Accepted) {
				t.Fatalf("step %d: Begin gave Pending %v with %q", i, p, result.Outcome)
			}
			if p != nil {
				pending = p
			}
		case "complete":
			if err := pending.Complete(ctx, *completed); err != nil {
				t.Fatalf("step %d: Complete: %v", i, err)
			}
			// Again, as after an unknown outcome: the same answer is no error.
			if err := pending.Complete(ctx, *completed); err != nil {
				t.Fatalf("step %d: Complete repeated: %v", i, err)
			}
			if err := pending.Complete(ctx, ops.Response{Status: 500}); err == nil {
				t.Fatalf("step %d: Complete with another answer: no error", i)
			}
			continue
		case "fail":
			effect := Effect(db, table, call, s.req)
			_, err = table.Do(ctx, call, func(ctx context.Context, tx *sql.Tx) (ops.Response, error) {
				if _, err := effect(ctx, tx); err != nil {
					return ops.Response{}, err
				}
				return ops.Response{}, errEffect
			})
			if !errors.Is(err, errEffect) || leases.IsRefusal(err) || errors.Is(err, leases.ErrOutcomeUnknown) {
				t.Fatalf("step %d: Do with a failing effect: %v; want the effect's error, neither a refusal nor unknown", i, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("step %d (%s %d %s %s): %v", i, s.kind, s.epoch, s.key, s.req, err)
		}
		if result.Outcome != s.want || result.Newest != s.newest {
			t.Fatalf("step %d (%s %d %s %s): %q, newest %d; want %q, newest %d", i, s.kind, s.epoch, s.key, s.req, result.Outcome, result.Newest, s.want, s.newest)
		}
		checkResponse(t, i, s, result)
	}
}

// checkResponse holds the answer to what the step expects: the effect's
// for a Do that is Accepted or a Replay, none for any other outcome.
func checkResponse(t *testing.T, i int, s step, result ops.Result) {
	t.Helper()
	want := s.answer
	if want == nil && s.kind == "do" && (s.want == leases.Accepted || s.want == leases.Replay) {
		want = &ops.Response{Status: 201, Type: "text/plain", Body: []byte(s.req)}
	}
	if want == nil {
		want = &ops.Response{}
	}
	got := result.Response
	if got.Status != want.Status || got.Type != want.Type || string(got.Body) != string(want.Body) {
		t.Fatalf("step %d: response %+v; want %+v", i, got, *want)
	}
}
