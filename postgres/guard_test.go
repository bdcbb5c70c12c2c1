package postgres_test

import (
	"database/sql"
	"errors"
	"slices"
	"testing"
	"time"

	"leases"
	"leases/fence"
	"leases/internal/fencetest"
	"leases/postgres"
	"leases/postgres/pgtest"
)

// AdmitLive admits a transaction of the holder of a lease only while the
// lease is live on the server's clock and its epoch the newest the fence
// has seen; LiveTenure's transactions are refused with errors that say
// which, each a refusal.
func TestAdmitLiveOutcomes(t *testing.T) {
	ctx := fencetest.Context(t)
	db := database(t, 0)
	l := newStore(t, db.DB, postgres.Options{}).Lessor()
	fences := fencetest.Setup(t, db, "admit_live")
	admit := func(held leases.Lease) leases.WriteResult {
		t.Helper()
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		result, err := l.AdmitLive(ctx, tx, fences, held)
		if err != nil {
			t.Fatal(err)
		}
		if result.Outcome == leases.Accepted {
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		return result
	}
	refused := func(tenure *postgres.LiveTenure, want ...error) {
		t.Helper()
		err := tenure.Tx(ctx, nil, func(*sql.Tx) error { return nil })
		for _, w := range want {
			if !errors.Is(err, w) {
				t.Fatalf("a transaction of %+v: %v; want %v", tenure.Lease(), err, want)
			}
		}
		if !leases.IsRefusal(err) {
			t.Fatalf("a transaction of %+v: %v is no refusal", tenure.Lease(), err)
		}
	}

	a, err := l.Acquire(ctx, "r", "A", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if got := admit(a); got.Outcome != leases.Accepted || got.Record.Epoch != a.Epoch {
		t.Fatalf("A's live lease: %+v; want accepted at epoch %d", got, a.Epoch)
	}
	tenureA, err := l.LiveTenure(ctx, db.DB, fences, a)
	if err != nil {
		t.Fatal(err)
	}
	if err := tenureA.Tx(ctx, nil, func(tx *sql.Tx) error {
		return fencetest.InsertBusiness(ctx, db, tx, fences, "r", a.Epoch, "a", 1)
	}); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx, a); err != nil {
		t.Fatal(err)
	}
	if got := admit(a); got.Outcome != leases.NotLive || got.Record.Epoch != a.Epoch {
		t.Fatalf("A's released lease: %+v; want not live, the fence at %d", got, a.Epoch)
	}
	refused(tenureA, postgres.ErrNotLive, leases.ErrNotHolder)

	// B's lease is short, to be waited out below; on a loaded machine it
	// may run out before B's tenure begins, and B acquires again for twice
	// as long.
	var (
		b       leases.Lease
		tenureB *postgres.LiveTenure
	)
	for ttl := 50 * time.Millisecond; tenureB == nil; ttl *= 2 {
		if b, err = l.Acquire(ctx, "r", "B", ttl); err != nil {
			t.Fatal(err)
		}
		if tenureB, err = l.LiveTenure(ctx, db.DB, fences, b); err != nil && !errors.Is(err, postgres.ErrNotLive) {
			t.Fatal(err)
		}
	}
	if got := admit(a); got.Outcome != leases.NotLive || got.Record.Epoch != b.Epoch {
		t.Fatalf("A's lease after B's grant: %+v; want not live, the fence at B's epoch", got)
	}
	awaitServerClock(t, db.DB, b.ExpiresAt)
	if got := admit(b); got.Outcome != leases.NotLive {
		t.Fatalf("B's lease at its expiry: %+v; want not live", got)
	}
	refused(tenureB, postgres.ErrNotLive, leases.ErrLeaseExpired)
	if _, err := l.LiveTenure(ctx, db.DB, fences, b); !errors.Is(err, postgres.ErrNotLive) {
		t.Fatalf("a live tenure begun after the expiry: %v; want ErrNotLive", err)
	}

	// The fence is ahead of the lease (another authority's epoch reached
	// it): live, but not the newest tenure.
	c, err := l.Acquire(ctx, "r", "C", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	tenureC, err := l.LiveTenure(ctx, db.DB, fences, c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fences.Tenure(ctx, db.DB, "r", c.Epoch+5); err != nil {
		t.Fatal(err)
	}
	if got := admit(c); got.Outcome != leases.Stale || got.Record.Epoch != c.Epoch+5 {
		t.Fatalf("C's live lease below the fence: %+v; want stale", got)
	}
	refused(tenureC, fence.ErrSuperseded)

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	bad := c
	bad.Epoch = 0
	if _, err := l.AdmitLive(ctx, tx, fences, bad); !errors.Is(err, leases.ErrInvalidInput) {
		t.Fatalf("epoch 0: %v; want ErrInvalidInput", err)
	}
	if rows := fencetest.BusinessRows(t, db, fences, "r"); !slices.Equal(rows, []string{fencetest.Row(a.Epoch, "a")}) {
		t.Fatalf("business rows %q; want A's one", rows)
	}
}

// A holder whose guarded transaction was admitted while its lease was
// live, and that then pauses (a stopped process, a long call) past the
// lease's expiry with the transaction open, cannot commit after the next
// holder was granted: the next grant waits for the transaction's lock on
// the lease row. Without a bound, the paused transaction commits when it
// resumes, before the grant; with idle_in_transaction_session_timeout the
// server ends the paused session, the grant comes after the timeout, and
// the paused holder's row never commits.
func TestPausedHolderCannotCommitAfterTheNextGrant(t *testing.T) {
	// The lease expires after 100 ms; B's acquire then waits for the
	// paused transaction, which the idle timeout, set once B is seen
	// waiting, ends 500 ms later.
	for _, idleTimeout := range []time.Duration{0, 500 * time.Millisecond} {
		t.Run("idle_in_transaction_session_timeout="+idleTimeout.String(), func(t *testing.T) {
			ctx := fencetest.Context(t)
			db := database(t, 0)
			store := newStore(t, db.DB, postgres.Options{})
			fences := fencetest.Setup(t, db, "paused_holder")
			paused := pausedHandle(t, pgtest.Shared(t))
			holderSide := sameStore(t, store, paused, postgres.Options{}).Lessor()
			resource := t.Name()
			// A's transaction must be admitted while its lease lives: on a
			// loaded machine 100 ms may not be enough to get there, and
			// then the round starts again with a lease twice as long.
			var (
				a       leases.Lease
				tenure  *postgres.LiveTenure
				p       *pause
				late    = make(chan error, 1)
				started bool
				err     error
			)
			for ttl := 100 * time.Millisecond; !started; ttl *= 2 {
				if a, err = holderSide.Acquire(ctx, resource, "A", ttl); err != nil {
					t.Fatal(err)
				}
				tenure, err = holderSide.LiveTenure(ctx, paused, fences, a)
				if errors.Is(err, postgres.ErrNotLive) {
					continue // ran out before its tenure began: the lease runs out, and A acquires again
				}
				if err != nil {
					t.Fatal(err)
				}
				p = newPause()
				go func() {
					late <- tenure.Tx(ctx, nil, func(tx *sql.Tx) error {
						if err := fencetest.InsertBusiness(ctx, db, tx, fences, resource, a.Epoch, "late", 1); err != nil {
							return err
						}
						return p.hold(ctx, tx) // paused, with the transaction open
					})
				}()
				select {
				case <-p.inside:
					started = true
				case err := <-late:
					if !errors.Is(err, postgres.ErrNotLive) {
						t.Fatal(err)
					}
				}
			}
			awaitServerClock(t, db.DB, a.ExpiresAt) // A's lease has expired; its transaction is open
			granted := make(chan leases.Lease, 1)
			failed := make(chan error, 1)
			go func() {
				b, err := store.Lessor().Acquire(ctx, resource, "B", time.Minute)
				if err != nil {
					failed <- err
					return
				}
				granted <- b
			}()
			var b leases.Lease
			grantedWhileOpen := func() {
				t.Helper()
				b := <-granted
				close(p.resume)
				err := <-late
				t.Fatalf("B was granted %+v while the paused holder's transaction was open; that transaction then ended with %v, "+
					"and these rows are committed: %q", b, err, fencetest.BusinessRows(t, db, fences, resource))
			}
			if idleTimeout == 0 {
				if !awaitLockWaitOr(t, db.DB, granted, failed) {
					grantedWhileOpen()
				}
				close(p.resume) // the pause ends: A's transaction commits, before B's grant
				if err := <-late; err != nil {
					t.Fatalf("the paused transaction, admitted while live: %v", err)
				}
				select {
				case b = <-granted:
				case err := <-failed:
					t.Fatal(err)
				}
				if rows := fencetest.BusinessRows(t, db, fences, resource); !slices.Equal(rows, []string{fencetest.Row(a.Epoch, "late")}) {
					t.Fatalf("rows %q; want the paused holder's row, committed before B's grant", rows)
				}
			} else {
				if !awaitLockWaitOr(t, db.DB, granted, failed) {
					grantedWhileOpen()
				}
				armed := time.Now()
				p.setIdleTimeout(t, idleTimeout)
				select {
				case b = <-granted: // the server ended the paused session
				case err := <-failed:
					t.Fatal(err)
				}
				t.Logf("B was granted %v after the paused transaction's idle timeout was set", time.Since(armed).Round(time.Millisecond))
				close(p.resume)
				if err := <-late; err == nil {
					t.Fatal("the paused holder's transaction committed after the server ended its session")
				}
				if rows := fencetest.BusinessRows(t, db, fences, resource); len(rows) != 0 {
					t.Fatalf("the paused holder's rows committed: %q", rows)
				}
			}
			if b.Epoch != a.Epoch+1 {
				t.Fatalf("B holds %+v; want the next epoch", b)
			}
			// From B's grant on, A is not live: nothing of it commits.
			if err := tenure.Tx(ctx, nil, func(*sql.Tx) error { return nil }); !errors.Is(err, postgres.ErrNotLive) {
				t.Fatalf("A's transaction after B's grant: %v; want ErrNotLive", err)
			}
		})
	}
}

// awaitLockWaitOr returns true once a backend of the server waits for a
// lock, and false if the call that should wait returned first (on done,
// which it leaves for the caller to read, or failed).
func awaitLockWaitOr[T any](t *testing.T, db *sql.DB, done <-chan T, failed <-chan error) bool {
	t.Helper()
	ctx := fencetest.Context(t)
	for {
		select {
		case err := <-failed:
			t.Fatalf("the call that should wait failed: %v", err)
		default:
		}
		if len(done) > 0 {
			return false
		}
		var waiting bool
		if err := db.QueryRowContext(ctx, `SELECT count(*) > 0 FROM pg_stat_activity WHERE wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			return true
		}
	}
}
