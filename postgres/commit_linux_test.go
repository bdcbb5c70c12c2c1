package postgres_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"leases"
	"leases/fence"
	"leases/postgres/pgtest"
	"leases/testkit/fencetest"
)

// A tenure's transaction whose context ends while its COMMIT is on its
// way (the session's deadline passed while the server was slow to answer)
// has an unknown outcome: the server may commit it, or not. pgx answers
// the context's end with the context's own error, which a transaction
// stopped before its commit also returns; taken for "nothing committed",
// a row the caller believes rolled back is in the table. Resolve then
// tells what became of it, and never "not committed" while the old
// backend can still commit: it is called while the backend, stopped with
// the COMMIT in its socket, still holds the transaction open, and it
// waits for the backend to end the transaction, one way or the other.
func TestCommitCutOffByTheContextIsAnUnknownOutcome(t *testing.T) {
	for _, c := range []struct {
		name      string
		terminate bool // the server ends the backend before it reads the COMMIT
		committed bool
	}{
		{"the backend commits", false, true},
		{"the backend is terminated", true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := fencetest.Context(t)
			db := database(t, 0)
			table := fencetest.Setup(t, db, "fence_commit_cut_off")
			resource := t.Name()
			tenure, backend, err := cutOffCommit(t, db, table, resource)
			if !errors.Is(err, leases.ErrOutcomeUnknown) {
				t.Fatalf("a COMMIT cut off on its way: %v; want an error matching leases.ErrOutcomeUnknown", err)
			}
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Tx said %v; want it to say that the context ended too", err)
			}
			type answer struct {
				committed bool
				err       error
			}
			resolved := make(chan answer, 1)
			go func() {
				committed, err := tenure.Resolve(ctx, err)
				resolved <- answer{committed, err}
			}()
			// Resolve has begun, and waits for the backend that holds the
			// transaction; only then does the backend go on.
			if !awaitLockWaitOr(t, db.DB, resolved, nil) {
				a := <-resolved
				t.Fatalf("Resolve answered %v, %v while the backend still held the transaction", a.committed, a.err)
			}
			releaseBackend(t, db, backend, c.terminate)
			a := <-resolved
			if a.err != nil {
				t.Fatal(a.err)
			}
			rows := fencetest.BusinessRows(t, db, table, resource)
			if got := len(rows) == 1; got != a.committed || a.committed != c.committed {
				t.Fatalf("Resolve answered committed=%v; the table holds %q (this case wants committed=%v)", a.committed, rows, c.committed)
			}
			// Resolve answers only the unknown outcomes of its own tenure.
			if _, err := tenure.Resolve(ctx, errors.New("another error")); !errors.Is(err, leases.ErrInvalidInput) {
				t.Fatalf("Resolve of another error: %v; want ErrInvalidInput", err)
			}
		})
	}
}

// releaseBackend lets the stopped backend go on, ended by the server
// first when terminate is set (before it reads its COMMIT).
func releaseBackend(t *testing.T, db fencetest.DB, backend int, terminate bool) {
	t.Helper()
	if terminate {
		if _, err := db.ExecContext(fencetest.Context(t), `SELECT pg_terminate_backend($1)`, backend); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Kill(backend, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
}

// cutOffCommit runs a tenure's transaction, on a connection of its own,
// whose backend is stopped (SIGSTOP) once the transaction has inserted
// its business row, and whose context ends once its COMMIT has been
// written to the stopped backend: the transaction's outcome is unknown,
// and the backend, still stopped, holds it open.
func cutOffCommit(t *testing.T, db fencetest.DB, table *fence.Table, resource string) (*fence.Tenure, int, error) {
	t.Helper()
	ctx := fencetest.Context(t)
	holder, watch := watchedHolder(t)
	tenure, err := fencetest.On(t, holder, table).Tenure(ctx, fencetest.Lease(resource, 1))
	if err != nil {
		t.Fatal(err)
	}
	session, end := context.WithCancel(ctx)
	defer end()
	go func() {
		<-watch.sent // the COMMIT is on its way to a backend that is stopped
		end()        // and the session ends
	}()
	var backend int
	err = tenure.Tx(session, nil, func(tx *sql.Tx) error {
		if err := fencetest.InsertBusiness(session, db, tx, table, resource, 1, "held", 1); err != nil {
			return err
		}
		if err := tx.QueryRowContext(session, `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
			return err
		}
		if err := syscall.Kill(backend, syscall.SIGSTOP); err != nil {
			return err
		}
		watch.armed.Store(true)
		return nil
	})
	if backend == 0 {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(backend, syscall.SIGCONT) }) // never leave a backend stopped
	return tenure, backend, err
}

// watchedHolder is a handle of one connection that tells, once armed,
// when a COMMIT has been written to it: sent is closed then.
func watchedHolder(t *testing.T) (holder *sql.DB, w *watch) {
	t.Helper()
	w = &watch{sent: make(chan struct{})}
	config, err := pgx.ParseConfig(pgtest.Shared(t).DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	config.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &commitWatch{Conn: conn, watch: w}, nil
	}
	holder = stdlib.OpenDB(*config)
	holder.SetMaxOpenConns(1)
	t.Cleanup(func() { _ = holder.Close() })
	return holder, w
}

// watch says what a watched connection does with a COMMIT once armed:
// it stops the backend stopFirst, if set, before writing it, and closes
// sent after.
type watch struct {
	armed     atomic.Bool
	stopFirst atomic.Int64
	sent      chan struct{}
	once      sync.Once
}

// commitWatch is a connection that reports a written COMMIT once armed.
type commitWatch struct {
	net.Conn
	watch *watch
}

func (c *commitWatch) Write(p []byte) (int, error) {
	commit := c.watch.armed.Load() && bytes.Contains(bytes.ToLower(p), []byte("commit"))
	if pid := c.watch.stopFirst.Load(); commit && pid != 0 {
		if err := syscall.Kill(int(pid), syscall.SIGSTOP); err != nil {
			return 0, err
		}
	}
	n, err := c.Conn.Write(p)
	if commit {
		c.watch.once.Do(func() { close(c.watch.sent) })
	}
	return n, err
}

// awaitBackendGone returns once the server no longer lists the backend
// pid: it has ended its session. Looked at until it says so (bounded by
// the test's deadline).
func awaitBackendGone(t *testing.T, db *sql.DB, pid int) {
	t.Helper()
	ctx := fencetest.Context(t)
	for {
		var there bool
		if err := db.QueryRowContext(ctx, `SELECT count(*) > 0 FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&there); err != nil {
			t.Fatal(err)
		}
		if !there {
			return
		}
	}
}
