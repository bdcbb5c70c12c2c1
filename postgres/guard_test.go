package postgres_test

import (
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"leases"
	"leases/fence"
	"leases/postgres"
	"leases/postgres/pgtest"
	"leases/testkit/fencetest"
)

// storeFence is the store's own fence table, with a business table
// beside it for fencetest's rows.
func storeFence(t testing.TB, db fencetest.DB, s *postgres.Store) *fence.Table {
	t.Helper()
	return fencetest.Setup(t, db, s.TenureFence().Name())
}

// A store's tenure admits a transaction only while the lease is live on
// the server's clock and its epoch the newest the store's fence has seen;
// its transactions are refused with errors that say which, each a
// refusal.
func TestTenureOutcomes(t *testing.T) {
	ctx := fencetest.Context(t)
	db := database(t, 0)
	store := newStore(t, db.DB, postgres.Options{})
	l := store.Lessor()
	fences := storeFence(t, db, store)
	refused := func(tenure *fence.Tenure, want ...error) {
		t.Helper()
		ran := false
		err := tenure.Tx(ctx, nil, func(*sql.Tx) error { ran = true; return nil })
		if ran {
			t.Errorf("a transaction of %+v ran its function; the admission must refuse first", tenure.Lease())
		}
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
	tenureA, err := store.Tenure(ctx, a)
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
	refused(tenureA, leases.ErrNotLive, leases.ErrNotHolder)

	// B's lease is short, to be waited out below; on a loaded machine it
	// may run out before B's tenure begins, and B acquires again for twice
	// as long.
	var (
		b       leases.Lease
		tenureB *fence.Tenure
	)
	for ttl := 50 * time.Millisecond; tenureB == nil; ttl *= 2 {
		if b, err = l.Acquire(ctx, "r", "B", ttl); err != nil {
			t.Fatal(err)
		}
		if tenureB, err = store.Tenure(ctx, b); err != nil && !errors.Is(err, leases.ErrNotLive) {
			t.Fatal(err)
		}
	}
	refused(tenureA, leases.ErrNotLive, leases.ErrNotHolder)
	awaitServerClock(t, db.DB, b.ExpiresAt)
	refused(tenureB, leases.ErrNotLive, leases.ErrLeaseExpired)
	if _, err := store.Tenure(ctx, b); !errors.Is(err, leases.ErrNotLive) {
		t.Fatalf("a tenure begun after the expiry: %v; want ErrNotLive", err)
	}

	// The fence is ahead of the lease (the authority's table was restored
	// from an old copy, say): live, but not the newest tenure. Only a
	// tenure writes the fence, and the check at its commit would refuse
	// this write: it is made with the table's triggers off.
	c, err := l.Acquire(ctx, "r", "C", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	tenureC, err := store.Tenure(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err == nil {
		_, err = tx.ExecContext(ctx, `SET LOCAL session_replication_role = replica`)
	}
	if err == nil {
		_, err = tx.ExecContext(ctx, `UPDATE "`+fences.Name()+`" SET epoch = epoch + 5 WHERE resource = 'r'`)
	}
	if err == nil {
		err = tx.Commit()
	}
	if err != nil {
		t.Fatal(err)
	}
	refused(tenureC, leases.ErrStale)

	bad := c
	bad.Epoch = 0
	if _, err := store.Tenure(ctx, bad); !errors.Is(err, leases.ErrInvalidInput) {
		t.Fatalf("epoch 0: %v; want ErrInvalidInput", err)
	}
	if rows := fencetest.BusinessRows(t, db, fences, "r"); !slices.Equal(rows, []string{fencetest.Row(a.Epoch, "a")}) {
		t.Fatalf("business rows %q; want A's one", rows)
	}
}

// A holder whose transaction was admitted while its lease was live, and
// that then pauses (a stopped process, a long call) past the lease's
// expiry with the transaction open, commits nothing after the expiry, nor
// after the next holder was granted: the next grant waits for the
// transaction's lock on the lease row, and the check at the commit
// refuses the paused transaction's COMMIT when it comes. Without a bound,
// the next holder waits until the paused holder resumes; with
// idle_in_transaction_session_timeout, the server ends the paused
// session and the grant comes after the timeout. Either way the paused
// holder's row never commits, and its error says why.
func TestPausedHolderCommitsNothingAfterItsExpiry(t *testing.T) {
	// The lease expires after 100 ms; B's acquire then waits for the
	// paused transaction, which the idle timeout, set once B is seen
	// waiting, ends 500 ms later.
	for _, idleTimeout := range []time.Duration{0, 500 * time.Millisecond} {
		t.Run("idle_in_transaction_session_timeout="+idleTimeout.String(), func(t *testing.T) {
			ctx := fencetest.Context(t)
			db := database(t, 0)
			store := newStore(t, db.DB, postgres.Options{})
			fences := storeFence(t, db, store)
			paused := pausedHandle(t, pgtest.Shared(t))
			holderSide := sameStore(t, store, paused, postgres.Options{})
			resource := t.Name()
			// A's transaction must be admitted while its lease lives: on a
			// loaded machine 100 ms may not be enough to get there, and
			// then the round starts again with a lease twice as long.
			var (
				a       leases.Lease
				tenure  *fence.Tenure
				p       *pause
				late    = make(chan error, 1)
				started bool
				err     error
			)
			for ttl := 100 * time.Millisecond; !started; ttl *= 2 {
				if a, err = holderSide.Lessor().Acquire(ctx, resource, "A", ttl); err != nil {
					t.Fatal(err)
				}
				tenure, err = holderSide.Tenure(ctx, a)
				if errors.Is(err, leases.ErrNotLive) {
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
					if !errors.Is(err, leases.ErrNotLive) {
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
			if !awaitLockWaitOr(t, db.DB, granted, failed) {
				grantedWhileOpen()
			}
			var lateErr error
			if idleTimeout == 0 {
				close(p.resume) // the pause ends, past the expiry: the COMMIT is refused, then B is granted
				lateErr = <-late
				if !errors.Is(lateErr, leases.ErrNotLive) || !errors.Is(lateErr, leases.ErrLeaseExpired) || !leases.IsRefusal(lateErr) {
					t.Fatalf("the paused transaction's COMMIT after the expiry: %v; want a refusal matching ErrNotLive and ErrLeaseExpired", lateErr)
				}
			} else {
				armed := time.Now()
				p.setIdleTimeout(t, idleTimeout)
				select {
				case b = <-granted: // the server ended the paused session
				case err := <-failed:
					t.Fatal(err)
				}
				t.Logf("B was granted %v after the paused transaction's idle timeout was set", time.Since(armed).Round(time.Millisecond))
				close(p.resume)
				lateErr = <-late
				if lateErr == nil {
					t.Fatal("the paused transaction committed after the server ended its session")
				}
				// The server's answer says it rolled back, or the client finds
				// the connection broken as it sends the COMMIT: then the outcome
				// is unknown, and Resolve answers at once.
				if errors.Is(lateErr, leases.ErrOutcomeUnknown) {
					committed, err := tenure.Resolve(ctx, lateErr)
					if err != nil || committed {
						t.Fatalf("Resolve of %v: committed=%v, %v; want not committed", lateErr, committed, err)
					}
				}
			}
			t.Logf("the paused holder's transaction: %v", lateErr)
			if b.Epoch == 0 {
				select {
				case b = <-granted:
				case err := <-failed:
					t.Fatal(err)
				}
			}
			if rows := fencetest.BusinessRows(t, db, fences, resource); len(rows) != 0 {
				t.Fatalf("the paused holder's rows committed: %q", rows)
			}
			if b.Epoch != a.Epoch+1 {
				t.Fatalf("B holds %+v; want the next epoch", b)
			}
			// From B's grant on, A is not live: nothing of it commits.
			if err := tenure.Tx(ctx, nil, func(*sql.Tx) error { return nil }); !errors.Is(err, leases.ErrNotLive) {
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

// How long the next holder waits for a paused holder's open transaction,
// against the paused session's idle_in_transaction_session_timeout. The
// paused transaction's last statement runs at the session's deadline, a
// margin before the lease's expiry (the latest a holder's statement
// runs under the session's context); the server then ends the session
// the timeout later, and the next grant comes then, or at the expiry if
// that is later. With the timeout at the margin, the next holder waits
// no longer than the expiry; each millisecond above it is a millisecond
// more. The figures are logged (docs/postgres.md quotes them); the test
// asserts only that nothing of the paused holder commits and that the
// next grant is not before the expiry.
func TestIdleTimeoutAgainstTheMargin(t *testing.T) {
	const ttl, margin = time.Second, 200 * time.Millisecond
	for _, idleTimeout := range []time.Duration{margin, 3 * margin, 5 * margin} {
		t.Run("idle_in_transaction_session_timeout="+idleTimeout.String(), func(t *testing.T) {
			ctx := fencetest.Context(t)
			db := database(t, 0)
			store := newStore(t, db.DB, postgres.Options{})
			fences := storeFence(t, db, store)
			holderSide := sameStore(t, store, pausedHandle(t, pgtest.Shared(t)), postgres.Options{})
			resource := t.Name()
			a, err := holderSide.Lessor().Acquire(ctx, resource, "A", ttl)
			if err != nil {
				t.Fatal(err)
			}
			tenure, err := holderSide.Tenure(ctx, a)
			if err != nil {
				t.Fatal(err)
			}
			idle := make(chan struct{})
			resume := make(chan struct{})
			late := make(chan error, 1)
			go func() {
				late <- tenure.Tx(ctx, nil, func(tx *sql.Tx) error {
					if err := fencetest.InsertBusiness(ctx, db, tx, fences, resource, a.Epoch, "late", 1); err != nil {
						return err
					}
					awaitServerClock(t, db.DB, a.ExpiresAt-margin.Milliseconds()) // the session's deadline
					if _, err := tx.ExecContext(ctx, fmt.Sprintf("SET LOCAL idle_in_transaction_session_timeout = %d", idleTimeout.Milliseconds())); err != nil {
						return err
					}
					close(idle) // the transaction idles from here, paused
					<-resume
					return nil
				})
			}()
			select {
			case <-idle:
			case err := <-late:
				t.Fatalf("A's transaction ended before its pause: %v", err)
			}
			b, err := store.Lessor().Acquire(ctx, resource, "B", ttl) // waits for the paused transaction, or for the expiry
			for errors.Is(err, leases.ErrLeaseHeld) {
				awaitServerClock(t, db.DB, a.ExpiresAt)
				b, err = store.Lessor().Acquire(ctx, resource, "B", ttl)
			}
			if err != nil {
				t.Fatal(err)
			}
			close(resume)
			lateErr := <-late
			if lateErr == nil {
				t.Fatal("the paused holder's transaction committed")
			}
			if b.GrantedAt < a.ExpiresAt {
				t.Fatalf("B granted at tick %d, before A's expiry at %d", b.GrantedAt, a.ExpiresAt)
			}
			if rows := fencetest.BusinessRows(t, db, fences, resource); len(rows) != 0 {
				t.Fatalf("the paused holder's rows committed: %q", rows)
			}
			t.Logf("margin %v, idle timeout %v: B granted %d ms after A's expiry", margin, idleTimeout, b.GrantedAt-a.ExpiresAt)
		})
	}
}
