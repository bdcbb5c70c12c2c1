package sqltx_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"leases"
	"leases/internal/sqltx"
	"leases/testkit/sqlitetest"
	"leases/testkit/testctx"
)

// scriptDriver is a database/sql driver whose BeginTx, Commit and
// Rollback answer what the script registered under the DSN says, and
// which records what database/sql handed it: a unit test of Run's
// classification, for answers a real database gives only under faults.
type scriptDriver struct{}

var scripts sync.Map // DSN (the test's name) -> *script

func init() { sql.Register("sqltx-script", scriptDriver{}) }

// script is one case's driver: what it answers, and what it was asked.
type script struct {
	begin error
	// commit answers the COMMIT (nil: it succeeds); end ends the case's
	// context, as a session's end while the COMMIT is under way.
	commit   func(end func()) error
	rollback error
	end      func()

	mu       sync.Mutex
	calls    []string // "begin", "commit", "rollback", as the driver saw them
	readOnly bool
	// rolledBack is closed at the driver's first rollback, whoever asked
	// for it (Run, or database/sql at the context's end).
	rolledBack chan struct{}
	once       sync.Once
}

func (s *script) record(call string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, call)
}

func (s *script) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

func (scriptDriver) Open(dsn string) (driver.Conn, error) {
	s, ok := scripts.Load(dsn)
	if !ok {
		return nil, fmt.Errorf("no script %q", dsn)
	}
	return conn{s.(*script)}, nil
}

type conn struct{ s *script }

func (conn) Prepare(string) (driver.Stmt, error) { return nil, errors.New("no statements") }
func (conn) Close() error                        { return nil }
func (c conn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c conn) BeginTx(_ context.Context, opts driver.TxOptions) (driver.Tx, error) {
	c.s.record("begin")
	c.s.mu.Lock()
	c.s.readOnly = opts.ReadOnly
	c.s.mu.Unlock()
	if c.s.begin != nil {
		return nil, c.s.begin
	}
	return tx(c), nil
}

type tx conn

func (t tx) Commit() error {
	t.s.record("commit")
	if t.s.commit == nil {
		return nil
	}
	return t.s.commit(t.s.end)
}

func (t tx) Rollback() error {
	t.s.record("rollback")
	t.s.once.Do(func() { close(t.s.rolledBack) })
	return t.s.rollback
}

// run is one case's world: its script, its context and how to end it.
type run struct {
	t     *testing.T
	s     *script
	ctx   context.Context
	cause error
	end   func() // ends ctx with cause
	steps []string
}

func newRun(t *testing.T, s *script) *run {
	s.rolledBack = make(chan struct{})
	scripts.Store(t.Name(), s)
	t.Cleanup(func() { scripts.Delete(t.Name()) })
	ctx, end := context.WithCancelCause(context.Background())
	t.Cleanup(func() { end(nil) })
	cause := errors.New("the session ended")
	s.end = func() { end(cause) }
	return &run{t: t, s: s, ctx: ctx, cause: cause, end: s.end}
}

// awaitRollback returns once the driver has rolled the transaction back
// (database/sql does it in a goroutine of its own when the context
// ends).
func (r *run) awaitRollback() {
	select {
	case <-r.s.rolledBack:
	case <-time.After(testctx.Bound(r.t)):
		r.t.Fatalf("the driver was asked %v and never to roll back the transaction whose context ended", r.s.seen())
	}
}

// codeError is a driver error with a SQLSTATE, as pgx's *pgconn.PgError.
type codeError string

func (e codeError) Error() string    { return "ERROR: SQLSTATE " + string(e) }
func (e codeError) SQLState() string { return string(e) }

// retryError is a driver error that says whether nothing of the request
// reached the server, as pgconn's errors do.
type retryError bool

func (e retryError) Error() string {
	return fmt.Sprintf("connection failed (safe to retry: %v)", bool(e))
}
func (e retryError) SafeToRetry() bool { return bool(e) }

var (
	errFn       = errors.New("fn failed")
	errBegin    = errors.New("cannot begin")
	errRollback = errors.New("rollback failed")
	errCommit   = errors.New("connection reset by peer")
	errRefused  = errors.New("refused at commit")
)

// A case of Run: what the driver and fn do, and what Run's error must and
// must not match (unknown: leases.ErrOutcomeUnknown; ended: the context's
// error and its cause), what the driver was asked and which steps ran.
type runCase struct {
	name    string
	script  *script
	options func(r *run) sqltx.Options
	fn      func(r *run, tx *sql.Tx) (bool, error)
	match   []error
	unknown bool
	ended   bool
	says    string
	calls   []string
	steps   []string
}

var (
	commits     = func(*run, *sql.Tx) (bool, error) { return true, nil }
	defaults    = func(*run) sqltx.Options { return sqltx.Options{} }
	known       = func(*run) sqltx.Options { return sqltx.Options{Known: knownRollback} }
	answers     = func(err error) func(func()) error { return func(func()) error { return err } }
	committed   = []string{"begin", "commit"}
	rolled      = []string{"begin", "rollback"}
	stepsCommit = []string{"begin", "commit"}
	stepsRoll   = []string{"begin", "rollback"}
)

func knownRollback(_ context.Context, err error) error { return sqltx.RolledBack(err) }

func runCases() []runCase {
	cases := []runCase{
		{name: "committed", script: &script{}, options: defaults, fn: commits,
			calls: committed, steps: stepsCommit},
		{name: "fn changed nothing: rolled back, no error", script: &script{}, options: defaults,
			fn: func(*run, *sql.Tx) (bool, error) { return false, nil }, calls: rolled, steps: stepsRoll},
		{name: "fn's error", script: &script{}, options: defaults,
			fn: func(*run, *sql.Tx) (bool, error) { return true, errFn }, match: []error{errFn}, calls: rolled, steps: stepsRoll},
		{name: "fn's error and a failed rollback: both said", script: &script{rollback: errRollback}, options: defaults,
			fn: func(*run, *sql.Tx) (bool, error) { return false, errFn }, match: []error{errFn}, says: "and the rollback failed: rollback failed",
			calls: rolled, steps: stepsRoll},
		{name: "fn's refusal after the context ended stays a refusal", script: &script{}, options: defaults,
			fn:    func(r *run, _ *sql.Tx) (bool, error) { r.end(); return false, leases.ErrLeaseHeld },
			match: []error{leases.ErrLeaseHeld}, calls: rolled, steps: stepsRoll},
		{name: "fn's failure after the context ended: the context's error and cause", script: &script{}, options: defaults,
			fn:    func(r *run, _ *sql.Tx) (bool, error) { r.end(); return true, errFn },
			match: []error{errFn}, ended: true, calls: rolled, steps: stepsRoll},
		{name: "fn committed the transaction itself: unknown, never \"not committed\"", script: &script{}, options: defaults,
			fn:    func(_ *run, tx *sql.Tx) (bool, error) { return true, tx.Commit() },
			match: []error{sql.ErrTxDone}, unknown: true, calls: committed, steps: stepsCommit},
		{name: "a failure to begin", script: &script{begin: errBegin}, options: defaults, fn: commits,
			match: []error{errBegin}, says: "begin: cannot begin", calls: []string{"begin"}, steps: []string{"begin"}},
		{name: "the context ended before the commit: not committed, never sent", script: &script{}, options: defaults,
			fn:    func(r *run, _ *sql.Tx) (bool, error) { r.end(); return true, nil },
			match: []error{sqltx.ErrNotCommitted}, ended: true, calls: rolled, steps: []string{"begin"}},
		{name: "a COMMIT database/sql never sent: it rolled back at the context's end", script: &script{},
			options: func(r *run) sqltx.Options {
				return sqltx.Options{Step: func(_ context.Context, name string) {
					r.steps = append(r.steps, name)
					if name == "commit" {
						if slices.Contains(r.s.seen(), "commit") {
							r.t.Fatal("the COMMIT was sent before the commit step")
						}
						r.end()
						r.awaitRollback()
					}
				}}
			},
			fn: commits, match: []error{sqltx.ErrNotCommitted, sql.ErrTxDone}, ended: true, calls: rolled, steps: stepsCommit},
		{name: "a COMMIT error with SafeToRetry true: unknown all the same (pgx says it of a COMMIT it wrote)", script: &script{commit: answers(retryError(true))},
			options: defaults, fn: commits, match: []error{retryError(true)}, unknown: true, calls: committed, steps: stepsCommit},
		{name: "a COMMIT error with SafeToRetry false: unknown", script: &script{commit: answers(retryError(false))},
			options: defaults, fn: commits, match: []error{retryError(false)}, unknown: true, calls: committed, steps: stepsCommit},
		{name: "a COMMIT error Known proves rolled back", script: &script{commit: answers(errCommit)},
			options: func(*run) sqltx.Options {
				return sqltx.Options{Known: func(context.Context, error) error { return errRefused }}
			}, fn: commits, match: []error{errRefused}, calls: committed, steps: stepsCommit},
		{name: "a COMMIT error Known does not recognise: unknown", script: &script{commit: answers(codeError("08006"))},
			options: known, fn: commits, match: []error{codeError("08006")}, unknown: true, calls: committed, steps: stepsCommit},
		{name: "40001 without Known: unknown (the zero Options)", script: &script{commit: answers(codeError("40001"))},
			options: defaults, fn: commits, match: []error{codeError("40001")}, unknown: true, calls: committed, steps: stepsCommit},
		{name: "any other COMMIT error: unknown", script: &script{commit: answers(errCommit)},
			options: defaults, fn: commits, match: []error{errCommit}, unknown: true, says: "commit failed", calls: committed, steps: stepsCommit},
		{name: "the context ended while the COMMIT was under way: unknown, with the context's error and cause",
			script:  &script{commit: func(end func()) error { end(); return errCommit }},
			options: defaults, fn: commits, match: []error{errCommit}, unknown: true, ended: true, calls: committed, steps: stepsCommit},
		{name: "the driver answered the COMMIT with the context's own error: unknown, with the cause",
			script:  &script{commit: func(end func()) error { end(); return fmt.Errorf("commit: %w", context.Canceled) }},
			options: defaults, fn: commits, unknown: true, ended: true, calls: committed, steps: stepsCommit},
	}
	for _, code := range []string{"40001", "40P01", "25P03"} {
		cases = append(cases, runCase{name: "a COMMIT answered with " + code + ": rolled back, not unknown",
			script: &script{commit: answers(codeError(code))}, options: known, fn: commits,
			match: []error{codeError(code)}, says: "commit refused, nothing committed", calls: committed, steps: stepsCommit})
	}
	return cases
}

// Run says which of the three kinds of outcome a transaction had, for
// every answer the driver can give at each step, and runs the steps in
// order.
func TestRunClassifies(t *testing.T) {
	for _, c := range runCases() {
		t.Run(c.name, func(t *testing.T) {
			r := newRun(t, c.script)
			o := c.options(r)
			if o.Step == nil {
				o.Step = func(_ context.Context, name string) { r.steps = append(r.steps, name) }
			}
			db, err := sql.Open("sqltx-script", t.Name())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = db.Close() })
			err = sqltx.Run(r.ctx, db, o, func(tx *sql.Tx) (bool, error) { return c.fn(r, tx) })
			r.check(err, c)
		})
	}
}

func (r *run) check(err error, c runCase) {
	t := r.t
	t.Helper()
	if err == nil && (c.match != nil || c.unknown || c.ended) {
		t.Fatal("no error; want one")
	}
	for _, w := range c.match {
		if !errors.Is(err, w) {
			t.Errorf("%v does not match %v", err, w)
		}
	}
	if errors.Is(err, leases.ErrOutcomeUnknown) != c.unknown {
		t.Errorf("%v: unknown outcome %v, want %v", err, !c.unknown, c.unknown)
	}
	if errors.Is(err, context.Canceled) != c.ended || errors.Is(err, r.cause) != c.ended {
		t.Errorf("%v: matches the context's error %v and its cause %v; want %v",
			err, errors.Is(err, context.Canceled), errors.Is(err, r.cause), c.ended)
	}
	if err != nil && (!strings.Contains(err.Error(), c.says) || strings.Contains(err.Error(), "\n")) {
		t.Errorf("%q: want one line saying %q", err, c.says)
	}
	if slices.Contains(c.calls, "rollback") && r.ctx.Err() != nil {
		// When the context has ended, database/sql rolls the transaction
		// back in a goroutine of its own; Run's Rollback may then return
		// sql.ErrTxDone before that goroutine has reached the driver.
		// (With the context alive, only Run rolls back: no wait.)
		r.awaitRollback()
	}
	if got := r.s.seen(); !slices.Equal(got, c.calls) {
		t.Errorf("the driver was asked %v; want %v", got, c.calls)
	}
	if !slices.Equal(r.steps, c.steps) {
		t.Errorf("steps %v; want %v", r.steps, c.steps)
	}
}

// Options.Tx reaches the driver's BeginTx.
func TestRunBeginsWithOptions(t *testing.T) {
	r := newRun(t, &script{})
	db, err := sql.Open("sqltx-script", t.Name())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	o := sqltx.Options{Tx: &sql.TxOptions{ReadOnly: true}}
	if err := sqltx.Run(r.ctx, db, o, func(*sql.Tx) (bool, error) { return false, nil }); err != nil {
		t.Fatal(err)
	}
	if !r.s.readOnly {
		t.Error("the driver began a transaction that is not read-only; want Options.Tx handed to BeginTx")
	}
}

// SQLState reads a driver's SQLSTATE through wrapping; RolledBack knows
// exactly the three answers that prove a rollback.
func TestSQLStateAndRolledBack(t *testing.T) {
	for _, c := range []struct {
		name   string
		err    error
		state  string
		rolled bool
	}{
		{"no error", nil, "", false},
		{"an error without a SQLSTATE", errCommit, "", false},
		{"a serialization failure, wrapped", fmt.Errorf("commit: %w", codeError("40001")), "40001", true},
		{"a deadlock", codeError("40P01"), "40P01", true},
		{"the server ended an idle transaction's session", codeError("25P03"), "25P03", true},
		{"a class 40 code that proves nothing (40002)", codeError("40002"), "40002", false},
		{"a lost connection", codeError("08006"), "08006", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := sqltx.SQLState(c.err); got != c.state {
				t.Errorf("SQLState = %q; want %q", got, c.state)
			}
			got := sqltx.RolledBack(c.err)
			if (got != nil) != c.rolled {
				t.Fatalf("RolledBack = %v; want a rollback: %v", got, c.rolled)
			}
			if got != nil && (!errors.Is(got, c.err) || errors.Is(got, leases.ErrOutcomeUnknown)) {
				t.Errorf("RolledBack = %v; want it to match %v and not an unknown outcome", got, c.err)
			}
		})
	}
}

// On a real SQLite file, Run commits what fn wrote and keeps nothing of
// a transaction fn failed or left unchanged.
func TestRunOnSQLite(t *testing.T) {
	db := sqlitetest.OpenDirectly(t, filepath.Join(t.TempDir(), "sqltx.db"))
	t.Cleanup(func() { _ = db.Close() })
	ctx := t.Context()
	if _, err := db.ExecContext(ctx, `CREATE TABLE rows (v TEXT)`); err != nil {
		t.Fatal(err)
	}
	insert := func(v string, commit bool, fail error) func(tx *sql.Tx) (bool, error) {
		return func(tx *sql.Tx) (bool, error) {
			if _, err := tx.ExecContext(ctx, `INSERT INTO rows VALUES (?)`, v); err != nil {
				return false, err
			}
			return commit, fail
		}
	}
	if err := sqltx.Run(ctx, db, sqltx.Options{}, insert("committed", true, nil)); err != nil {
		t.Fatalf("a transaction that commits: %v", err)
	}
	if err := sqltx.Run(ctx, db, sqltx.Options{}, insert("failed", true, errFn)); !errors.Is(err, errFn) || errors.Is(err, leases.ErrOutcomeUnknown) {
		t.Fatalf("a transaction fn failed: %v; want fn's error, not an unknown outcome", err)
	}
	if err := sqltx.Run(ctx, db, sqltx.Options{}, insert("unchanged", false, nil)); err != nil {
		t.Fatalf("a transaction that changes nothing: %v", err)
	}
	var got []string
	rows, err := db.QueryContext(ctx, `SELECT v FROM rows ORDER BY rowid`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		got = append(got, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"committed"}) {
		t.Errorf("rows after the three transactions: %q; want only the committed one", got)
	}
}
