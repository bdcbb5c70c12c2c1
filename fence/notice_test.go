package fence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"modernc.org/sqlite"

	"leases"
	"leases/fence"
	"leases/testkit/fencetest"
)

// refuseFenceWrites makes the database refuse every statement of kind
// ("INSERT" or "UPDATE") on the fence table from now on, with a trigger
// of the test's own: a statement of the fence that fails, as one does on
// a full disk or under a constraint a user added.
func refuseFenceWrites(t *testing.T, db fencetest.DB, table *fence.Table, kind string) string {
	t.Helper()
	why := "the test refuses every " + strings.ToLower(kind) + " of the fence"
	if _, err := db.ExecContext(fencetest.Context(t), fmt.Sprintf(
		`CREATE TRIGGER %s_refuse_%s BEFORE %s ON %s BEGIN SELECT RAISE(ABORT, '%s'); END`,
		table.Name(), strings.ToLower(kind), kind, table.Name(), why)); err != nil {
		t.Fatal(err)
	}
	return why
}

// A tenure whose first observe fails is no tenure: Tenure returns the
// failure, which is neither a refusal nor an unknown outcome, and no
// fence row, rather than a tenure that never raised the fence (and would
// leave every older tenure free to commit).
func TestTenureReturnsTheErrorOfItsObserve(t *testing.T) {
	ctx := fencetest.Context(t)
	db := usersFile(t)
	table := fencetest.Setup(t, db, "observe_fails")
	why := refuseFenceWrites(t, db, table, "INSERT")
	tenure, err := table.Tenure(ctx, fencetest.Lease("r", 1))
	switch {
	case tenure != nil:
		t.Fatalf("Tenure returned a tenure of epoch %d (and %v) though its observe failed", tenure.Epoch(), err)
	case err == nil || !strings.Contains(err.Error(), why):
		t.Fatalf("Tenure: %v; want the observe's failure (%q)", err, why)
	case leases.IsRefusal(err) || errors.Is(err, leases.ErrOutcomeUnknown):
		t.Fatalf("Tenure: %v; want a failure before commit, neither a refusal nor an unknown outcome", err)
	}
	if record, found := fencetest.Committed(t, db, table, "r"); found {
		t.Fatalf("the fence row %+v was committed", record)
	}
}

// A transaction whose admission fails runs nothing: Tx returns the
// failure, the function is never called, and nothing of it commits.
// Taken for an admission, the failure would let the function commit its
// rows without the fence row ever having been checked or locked.
func TestTxReturnsTheErrorOfItsAdmitAndRunsNothing(t *testing.T) {
	ctx := fencetest.Context(t)
	db := usersFile(t)
	table := fencetest.Setup(t, db, "admit_fails")
	tenure, err := table.Tenure(ctx, fencetest.Lease("r", 1))
	if err != nil {
		t.Fatal(err)
	}
	why := refuseFenceWrites(t, db, table, "UPDATE") // the admit updates the tenure's row
	ran := false
	err = tenure.Tx(ctx, nil, func(tx *sql.Tx) error {
		ran = true
		return fencetest.InsertBusiness(ctx, db, tx, table, "r", 1, "unfenced", 1)
	})
	switch {
	case ran:
		t.Fatalf("the function ran though the admission failed (Tx: %v)", err)
	case err == nil || !strings.Contains(err.Error(), why):
		t.Fatalf("Tx: %v; want the admission's failure (%q)", err, why)
	case leases.IsRefusal(err) || errors.Is(err, leases.ErrOutcomeUnknown):
		t.Fatalf("Tx: %v; want a failure before commit, neither a refusal nor an unknown outcome", err)
	}
	if rows := fencetest.BusinessRows(t, db, table, "r"); len(rows) != 0 {
		t.Fatalf("business rows %q committed without an admission", rows)
	}
}

// A tenure's transaction whose context ends while its COMMIT is under way
// has an unknown outcome on SQLite too, as on PostgreSQL: the session
// ends from inside the COMMIT (SQLite's commit hook runs in it, once the
// COMMIT holds the write lock), and the COMMIT fails (the hook vetoes it,
// as a full disk or the driver's interrupt of an ended context would
// fail it). The error says so, and says the context's end; Tx refuses to
// begin another transaction of the tenure until Resolve has told what
// became of it, and Resolve tells it: nothing committed.
func TestCommitCutOffByItsContextIsAnUnknownOutcomeOnSQLite(t *testing.T) {
	ctx := fencetest.Context(t)
	db := usersFile(t)
	table := fencetest.Setup(t, db, "cut_off")
	tenure, err := table.Tenure(ctx, fencetest.Lease("r", 1))
	if err != nil {
		t.Fatal(err)
	}
	sessionEnded := errors.New("the session ended")
	session, end := context.WithCancelCause(ctx)
	defer end(nil)
	var armed atomic.Bool
	onCommit(t, db, func() { end(sessionEnded) }, &armed)
	txErr := tenure.Tx(session, nil, func(tx *sql.Tx) error {
		if err := fencetest.InsertBusiness(session, db, tx, table, "r", 1, "cut off", 1); err != nil {
			return err
		}
		armed.Store(true)
		return nil
	})
	switch {
	case armed.Load():
		t.Fatalf("Tx: %v, and its COMMIT never ran", txErr)
	case !errors.Is(txErr, leases.ErrOutcomeUnknown):
		t.Fatalf("a COMMIT cut off by the context: %v; want an error matching leases.ErrOutcomeUnknown", txErr)
	case !errors.Is(txErr, context.Canceled) || !errors.Is(txErr, sessionEnded):
		t.Fatalf("Tx: %v; want it to say that the context ended, and why", txErr)
	}
	if err := tenure.Tx(ctx, nil, func(*sql.Tx) error { return nil }); !errors.Is(err, fence.ErrUnresolved) {
		t.Fatalf("the next Tx before Resolve: %v; want ErrUnresolved", err)
	}
	committed, err := tenure.Resolve(ctx, txErr)
	if err != nil || committed {
		t.Fatalf("Resolve: committed %v, %v; want not committed", committed, err)
	}
	if rows := fencetest.BusinessRows(t, db, table, "r"); len(rows) != 0 {
		t.Fatalf("Resolve said not committed; the table holds %q", rows)
	}
	if err := tenure.Tx(ctx, nil, func(tx *sql.Tx) error {
		return fencetest.InsertBusiness(ctx, db, tx, table, "r", 1, "after", 1)
	}); err != nil {
		t.Fatalf("Tx once resolved: %v", err)
	}
}

// onCommit runs fn inside the next COMMIT on db's one connection once
// armed, disarms, and fails that COMMIT.
func onCommit(t *testing.T, db fencetest.DB, fn func(), armed *atomic.Bool) {
	t.Helper()
	conn, err := db.Conn(fencetest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.Raw(func(c any) error {
		hooks, ok := c.(sqlite.HookRegisterer)
		if !ok {
			return fmt.Errorf("the driver's connection %T has no commit hook", c)
		}
		hooks.RegisterCommitHook(func() int32 {
			if armed.CompareAndSwap(true, false) {
				fn()
				return 1 // SQLite rolls the transaction back
			}
			return 0
		})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
