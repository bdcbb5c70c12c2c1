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
	"leases/internal/fencetest"
	"leases/postgres/pgtest"
)

// A tenure's transaction whose context ends while its COMMIT is on its
// way (the session's deadline passed while the server was slow to answer)
// has an unknown outcome: the server may commit it, and here it does.
// pgx answers the context's end with the context's own error, which a
// transaction stopped before its commit also returns; taken for "nothing
// committed", a row the caller believes rolled back is in the table.
func TestCommitCutOffByTheContextIsAnUnknownOutcome(t *testing.T) {
	ctx := fencetest.Context(t)
	server := pgtest.Shared(t)
	db := database(t, 0)
	table := fencetest.Setup(t, db, "fence_commit_cut_off")
	resource := t.Name()

	// The holder's connection tells when a COMMIT has been written to it.
	var armed atomic.Bool
	sent := make(chan struct{})
	var once sync.Once
	config, err := pgx.ParseConfig(server.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	config.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &commitWatch{Conn: conn, armed: &armed, sent: func() { once.Do(func() { close(sent) }) }}, nil
	}
	holder := stdlib.OpenDB(*config)
	holder.SetMaxOpenConns(1)
	t.Cleanup(func() { _ = holder.Close() })

	tenure, err := table.Tenure(ctx, holder, resource, 1)
	if err != nil {
		t.Fatal(err)
	}
	session, end := context.WithCancel(ctx)
	defer end()
	go func() {
		<-sent // the COMMIT is on its way to a backend that is stopped
		end()  // and the session ends
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
		armed.Store(true)
		return nil
	})
	if backend == 0 {
		t.Fatal(err)
	}
	// The backend goes on: it reads the COMMIT, commits, then finds its
	// connection closed and exits.
	if err := syscall.Kill(backend, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	awaitBackendGone(t, db.DB, backend)
	rows := fencetest.BusinessRows(t, db, table, resource)
	if len(rows) != 1 {
		t.Fatalf("the held COMMIT left %q; this test needs it to commit", rows)
	}
	if !errors.Is(err, leases.ErrOutcomeUnknown) {
		t.Fatalf("the transaction committed, and Tx said: %v; want an error matching leases.ErrOutcomeUnknown", err)
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Tx said %v; want it to say that the context ended too", err)
	}
}

// commitWatch is a connection that reports a written COMMIT once armed.
type commitWatch struct {
	net.Conn
	armed *atomic.Bool
	sent  func()
}

func (c *commitWatch) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if c.armed.Load() && bytes.Contains(bytes.ToLower(p), []byte("commit")) {
		c.sent()
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
