package postgres_test

import (
	"context"
	"database/sql"
	"syscall"
	"testing"

	"leases/fence"
	"leases/ops"
	"leases/testkit/fencetest"
	"leases/testkit/opstest"
)

// A tool call whose context ends while its COMMIT is on its way has an
// unknown outcome, and the same call again (from another process, here
// another handle) is answered from the record: it waits while the first
// call's backend, stopped with the COMMIT in its socket, still holds the
// transaction, and then answers Replay if that committed, or does the
// operation (Accepted) if it did not. The effect is there once.
func TestOpsCommitCutOffIsAnsweredByTheRecord(t *testing.T) {
	for _, c := range []struct {
		name      string
		terminate bool   // the server ends the backend before it reads the COMMIT
		resource  string // (no "commit" in it: the watch looks for that word)
	}{
		{"the backend commits", false, "r1"},
		{"the backend is terminated", true, "r2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := fencetest.Context(t)
			db := database(t, 0)
			table := opstest.Setup(t, db, "ops_cut_off")
			call := ops.Call{Resource: opstest.Resource(c.resource), Epoch: 1, Key: "k", Request: []byte("a")}
			lost, backend := cutOffCall(t, db, call)
			retried := make(chan error, 1)
			var result ops.Result
			go func() {
				var err error
				result, err = opstest.Again(ctx, db, table, call)
				retried <- err
			}()
			if !awaitLockWaitOr(t, db.DB, retried, nil) {
				t.Fatalf("the retry answered %+v, %v while the first call's backend still held it", result, <-retried)
			}
			releaseBackend(t, db, backend, c.terminate)
			err := <-retried
			opstest.CheckRetry(t, db, table, call, lost, !c.terminate, result, err)
		})
	}
}

// cutOffCall runs call through a record on a handle of its own, whose
// backend is stopped (SIGSTOP) right before the COMMIT is written to it
// (the record is stored after the effect, so the backend must answer
// until then), and whose context ends once the COMMIT has been written.
func cutOffCall(t *testing.T, db fencetest.DB, call ops.Call) (error, int) {
	t.Helper()
	holder, watch := watchedHolder(t)
	table, err := ops.New(holder, ops.Options{Dialect: fence.PostgreSQL, Table: "ops_cut_off"})
	if err != nil {
		t.Fatal(err)
	}
	session, end := context.WithCancel(fencetest.Context(t))
	defer end()
	go func() {
		<-watch.sent // the COMMIT is on its way to a backend that is stopped
		end()        // and the session ends
	}()
	effect := opstest.Effect(db, table, call, string(call.Request))
	var backend int
	_, err = table.Do(session, call, func(ctx context.Context, tx *sql.Tx) (ops.Response, error) {
		resp, err := effect(ctx, tx)
		if err != nil {
			return resp, err
		}
		if err := tx.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
			return resp, err
		}
		watch.stopFirst.Store(int64(backend))
		watch.armed.Store(true)
		return resp, nil
	})
	if backend == 0 {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(backend, syscall.SIGCONT) }) // never leave a backend stopped
	return err, backend
}
