package postgres_test

import (
	"database/sql"
	"errors"
	"slices"
	"testing"
	"time"

	"leases/fence"
	"leases/internal/fencetest"
	"leases/postgres/pgtest"
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
			paused := pausedHandle(t, server, idleTimeout)
			old, err := table.Tenure(ctx, paused, resource, 1)
			if err != nil {
				t.Fatal(err)
			}
			inside, resume := make(chan struct{}), make(chan struct{})
			oldDone := make(chan error, 1)
			go func() {
				oldDone <- old.Tx(ctx, nil, func(tx *sql.Tx) error {
					if err := fencetest.InsertBusiness(ctx, db, tx, table, resource, 1, "late", 1); err != nil {
						return err
					}
					close(inside)
					<-resume // paused, with the transaction open
					return nil
				})
			}()
			<-inside
			began := time.Now()
			newTenure := make(chan error, 1)
			go func() {
				_, err := table.Tenure(ctx, db.DB, resource, 2)
				newTenure <- err
			}()
			awaitLockWait(t, db.DB) // the new holder's observe waits for the fence row
			if idleTimeout > 0 {
				if err := <-newTenure; err != nil { // the server ended the paused session
					t.Fatal(err)
				}
				t.Logf("%s: the new holder's tenure waited %v for the paused holder's transaction",
					name, time.Since(began).Round(time.Millisecond))
				close(resume)
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
				close(resume) // the pause ends: the old transaction commits, then the new tenure begins
				if err := <-oldDone; err != nil {
					t.Fatal(err)
				}
				if err := <-newTenure; err != nil {
					t.Fatal(err)
				}
				if rows := fencetest.BusinessRows(t, db, table, resource); !slices.Equal(rows, []string{fencetest.Row(1, "late")}) {
					t.Fatalf("rows %q; want the old tenure's row, committed before the new tenure began", rows)
				}
				if err := old.Tx(ctx, nil, func(*sql.Tx) error { return nil }); !errors.Is(err, fence.ErrSuperseded) {
					t.Fatalf("the old tenure after the new one began: %v; want ErrSuperseded", err)
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
// its own process has, with idle_in_transaction_session_timeout set when
// idleTimeout is above 0.
func pausedHandle(t *testing.T, server *pgtest.Server, idleTimeout time.Duration) *sql.DB {
	t.Helper()
	dsn := server.DSN("postgres")
	if idleTimeout > 0 {
		dsn += " idle_in_transaction_session_timeout=" + idleTimeout.String()
	}
	paused, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = paused.Close() })
	return paused
}
