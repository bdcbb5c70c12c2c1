package sqlite_test

import (
	"database/sql"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"leases"
	"leases/clock"
	"leases/fence"
	"leases/sqlite"
	"leases/testkit/testctx"
)

// The gap closed in the user's transaction: a team that keeps its own
// rows in the leases file checks, in the same transaction as its rows,
// that the lease is still live on the host's clock and raises the fence.
// Rows commit only while the lease lives; a holder past its expiry, or
// superseded, is NotLive; and a holder paused inside its transaction
// holds the file's write lock, so the next grant comes after its commit:
// the business rows' epochs never go down in commit order.
func TestGuardInTheUsersTransaction(t *testing.T) {
	ctx := testctx.Context(t)
	path := filepath.Join(t.TempDir(), "leases.db")
	host := clock.NewManual(1_000)
	open := func() *sqlite.Store {
		s, err := sqlite.Options{Clock: host}.Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	store, other := open(), open()
	fences, err := fence.New(fence.SQLite, fence.DefaultTable)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Tx(ctx, func(tx *sql.Tx) error {
		if err := fences.Create(ctx, tx); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `CREATE TABLE invoices (job TEXT, epoch INTEGER)`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// write is a holder's transaction: the guard, and the row only when
	// the guard accepts; between the two, pause runs.
	write := func(s *sqlite.Store, held leases.Lease, pause func()) leases.Outcome {
		var outcome leases.Outcome
		if err := s.Tx(ctx, func(tx *sql.Tx) error {
			result, err := s.Guard(ctx, tx, held, fences)
			if err != nil {
				return err
			}
			if outcome = result.Outcome; outcome != leases.Accepted {
				return nil
			}
			pause()
			_, err = tx.ExecContext(ctx, `INSERT INTO invoices VALUES ('invoice-7', ?)`, held.Epoch)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return outcome
	}
	rows := func() []int64 {
		var epochs []int64
		if err := store.Tx(ctx, func(tx *sql.Tx) error {
			r, err := tx.QueryContext(ctx, `SELECT epoch FROM invoices ORDER BY rowid`)
			if err != nil {
				return err
			}
			defer r.Close()
			for r.Next() {
				var e int64
				if err := r.Scan(&e); err != nil {
					return err
				}
				epochs = append(epochs, e)
			}
			return r.Err()
		}); err != nil {
			t.Fatal(err)
		}
		return epochs
	}

	a, err := store.Lessor().Acquire(ctx, "invoice-7", "A", 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if got := write(store, a, func() {}); got != leases.Accepted {
		t.Fatalf("A while its lease lives: %v", got)
	}
	// A pauses inside its next transaction, past its lease's expiry; B
	// asks for the lease meanwhile, through another connection.
	inside, resume := make(chan struct{}), make(chan struct{})
	done := make(chan leases.Outcome, 1)
	go func() { done <- write(store, a, func() { close(inside); <-resume }) }()
	<-inside
	if err := host.Advance(1_200); err != nil {
		t.Fatal(err)
	}
	granted := make(chan leases.Lease, 1)
	go func() {
		b, err := other.Lessor().Acquire(ctx, "invoice-7", "B", 100*time.Millisecond)
		if err != nil {
			t.Error(err)
		}
		granted <- b
	}()
	close(resume) // B's grant waits for the file's write lock, which A's transaction holds
	if got := <-done; got != leases.Accepted {
		t.Fatalf("A's paused transaction: %v (its check came before the expiry)", got)
	}
	b := <-granted
	if b.Epoch != 2 {
		t.Fatalf("B: %+v; want epoch 2", b)
	}
	// A, now past its expiry and superseded, is refused; B writes.
	if got := write(store, a, func() {}); got != leases.NotLive {
		t.Fatalf("A after B's grant: %v; want not-live", got)
	}
	if got := write(other, b, func() {}); got != leases.Accepted {
		t.Fatalf("B: %v", got)
	}
	if err := host.Advance(1_300); err != nil { // B's lease runs out
		t.Fatal(err)
	}
	if got := write(other, b, func() {}); got != leases.NotLive {
		t.Fatalf("B at its expiry: %v; want not-live", got)
	}
	if got := rows(); !slices.Equal(got, []int64{1, 1, 2}) {
		t.Fatalf("rows at epochs %v; want A's two, then B's: epochs never go down in commit order", got)
	}
	if err := store.Tx(ctx, func(*sql.Tx) error { return errors.New("no") }); err == nil {
		t.Fatal("a failing Tx committed")
	}
}
