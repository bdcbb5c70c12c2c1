package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"leases"
	"leases/fence"
	"leases/postgres/pgtest"
	"leases/testkit/fencetest"
)

// A holder whose transaction is open in the fence (admitted, then paused:
// a stopped process, a long call) holds the fence row, and the next
// holder's tenure waits for it. PostgreSQL's
// idle_in_transaction_session_timeout bounds that wait: the server ends
// the paused holder's session, the new tenure begins, and the paused
// holder's rows never commit. Without the setting the new holder waits
// until the old transaction ends, which then commits first, at the older
// epoch: before the new tenure in commit order.
func TestPausedHoldersTransactionIsBoundedByTheIdleTimeout(t *testing.T) {
	for _, idleTimeout := range []time.Duration{200 * time.Millisecond, 0} {
		name := "idle_in_transaction_session_timeout=" + idleTimeout.String()
		t.Run(name, func(t *testing.T) {
			ctx := fencetest.Context(t)
			server := pgtest.Shared(t)
			db := fencetest.DB{DB: pgtest.Open(t, server, 0), Dialect: fence.PostgreSQL}
			table := fencetest.Setup(t, db, "fence_paused")
			resource := t.Name()
			paused := pausedHandle(t, server)
			old, err := fencetest.On(t, paused, table).Tenure(ctx, fencetest.Lease(resource, 1))
			if err != nil {
				t.Fatal(err)
			}
			p := newPause()
			oldDone := make(chan error, 1)
			go func() {
				oldDone <- old.Tx(ctx, nil, func(tx *sql.Tx) error {
					if err := fencetest.InsertBusiness(ctx, db, tx, table, resource, 1, "late", 1); err != nil {
						return err
					}
					return p.hold(ctx, tx) // paused, with the transaction open
				})
			}()
			<-p.inside
			newTenure := make(chan error, 1)
			go func() {
				_, err := table.Tenure(ctx, fencetest.Lease(resource, 2))
				newTenure <- err
			}()
			awaitLockWait(t, db.DB) // the new holder's observe waits for the fence row
			if idleTimeout > 0 {
				armed := time.Now()
				p.setIdleTimeout(t, idleTimeout)
				if err := <-newTenure; err != nil { // the server ended the paused session
					t.Fatal(err)
				}
				t.Logf("%s: the new holder's tenure began %v after the timeout was set",
					name, time.Since(armed).Round(time.Millisecond))
				close(p.resume)
				if err := <-oldDone; err == nil {
					t.Fatal("the paused holder's transaction committed after its session was ended")
				}
				if rows := fencetest.BusinessRows(t, db, table, resource); len(rows) != 0 {
					t.Fatalf("the paused holder's rows committed: %q", rows)
				}
			} else {
				select {
				case err := <-newTenure:
					t.Fatalf("the new tenure began while the old transaction held the row: %v", err)
				default:
				}
				close(p.resume) // the pause ends: the old transaction commits, then the new tenure begins
				if err := <-oldDone; err != nil {
					t.Fatal(err)
				}
				if err := <-newTenure; err != nil {
					t.Fatal(err)
				}
				if rows := fencetest.BusinessRows(t, db, table, resource); !slices.Equal(rows, []string{fencetest.Row(1, "late")}) {
					t.Fatalf("rows %q; want the old tenure's row, committed before the new tenure began", rows)
				}
				if err := old.Tx(ctx, nil, func(*sql.Tx) error { return nil }); !errors.Is(err, leases.ErrStale) {
					t.Fatalf("the old tenure after the new one began: %v; want ErrStale", err)
				}
			}
			if record, _ := fencetest.Committed(t, db, table, resource); record.Epoch != 2 {
				t.Fatalf("the fence is at %+v; want epoch 2", record)
			}
		})
	}
}

// awaitLockWait returns once a backend of the server waits for a lock:
// PostgreSQL's own report that a statement is blocked, looked at until it
// says so (bounded by the test's deadline).
func awaitLockWait(t *testing.T, db *sql.DB) {
	t.Helper()
	ctx := fencetest.Context(t)
	for {
		var waiting bool
		if err := db.QueryRowContext(ctx, `SELECT count(*) > 0 FROM pg_stat_activity WHERE wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			return
		}
	}
}

// pausedHandle is a paused holder's own handle on server's database, as
// its own process has.
func pausedHandle(t *testing.T, server *pgtest.Server) *sql.DB {
	t.Helper()
	paused, err := sql.Open("pgx", server.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = paused.Close() })
	return paused
}

// pause keeps a paused holder's transaction open (a stopped process, a long
// call) until the test resumes it, and can set the transaction's
// idle_in_transaction_session_timeout while it is paused. The server's
// timer starts when the transaction next goes idle, right after the
// setting: the tests arm it only once the next holder is seen waiting.
// Set on the connection from the start, it could run out before a loaded
// machine's next holder had even asked, and no wait would be seen.
type pause struct {
	inside, resume chan struct{}
	arm            chan time.Duration
	armed          chan error
}

func newPause() *pause {
	return &pause{inside: make(chan struct{}), resume: make(chan struct{}), arm: make(chan time.Duration), armed: make(chan error)}
}

// hold is the paused part of the transaction: it reports that the
// transaction is open, then waits to be resumed, setting the idle timeout
// if asked to first.
func (p *pause) hold(ctx context.Context, tx *sql.Tx) error {
	close(p.inside)
	select {
	case <-p.resume:
		return nil
	case timeout := <-p.arm:
		_, err := tx.ExecContext(ctx, fmt.Sprintf("SET LOCAL idle_in_transaction_session_timeout = %d", timeout.Milliseconds()))
		p.armed <- err
		if err != nil {
			return err
		}
	}
	<-p.resume
	return nil
}

// setIdleTimeout sets the paused transaction's idle timeout; the server
// ends the session that long after.
func (p *pause) setIdleTimeout(t *testing.T, timeout time.Duration) {
	t.Helper()
	p.arm <- timeout
	if err := <-p.armed; err != nil {
		t.Fatal(err)
	}
}
