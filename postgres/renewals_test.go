package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"testing"
	"time"

	"leases"
	"leases/postgres"
	"leases/testkit/fencetest"
)

// heldBatch acquires x and then each of resources for A, and holds a
// batch of renewals in flight: a renewal of x waits for the row lock of
// a transaction of the test's (locker), so that the renewals the test
// joins next go, together, in the next batch.
func heldBatch(t *testing.T, s *postgres.Store, monitor *sql.DB, resources ...string) (locker *sql.Tx, x func() (leases.Lease, error), held []leases.Lease) {
	ctx := fencetest.Context(t)
	l := s.Lessor()
	for _, r := range append([]string{"x"}, resources...) {
		lease, err := l.Acquire(ctx, r, "A", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, lease)
	}
	locker, err := monitor.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = locker.Rollback() })
	if _, err := locker.ExecContext(ctx, `SELECT 1 FROM "`+s.Tables()[0]+`" WHERE resource = 'x' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	x = s.JoinRenewal(ctx, held[0], time.Minute)
	awaitLockWait(t, monitor)
	return locker, x, held[1:]
}

// In one batch, each renewal is decided on its own row: one refused
// (an epoch that is not the holder's) does not refuse the other.
func TestARefusalInABatchIsOneRenewalsOwn(t *testing.T) {
	ctx := fencetest.Context(t)
	db := database(t, 0).DB
	s := newStore(t, db, postgres.Options{})
	locker, x, held := heldBatch(t, s, db, "r", "s")
	wrong := held[1]
	wrong.Epoch++
	r, refused := s.JoinRenewal(ctx, held[0], time.Minute), s.JoinRenewal(ctx, wrong, time.Minute)
	if err := locker.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := x(); err != nil {
		t.Fatalf("the renewal in flight: %v", err)
	}
	if lease, err := r(); err != nil || lease.ExpiresAt <= held[0].ExpiresAt {
		t.Fatalf("the renewal beside a refused one: %+v, %v; want it renewed", lease, err)
	}
	if _, err := refused(); !errors.Is(err, leases.ErrNotHolder) || errors.Is(err, leases.ErrOutcomeUnknown) {
		t.Fatalf("the renewal of an epoch not granted: %v; want ErrNotHolder", err)
	}
}

// A batch whose statement got no answer (its backend ended) is an
// unknown outcome for each renewal in it, and a renewal decided after it
// (a second one of the same resource, decided in a transaction of its
// own) is answered on its own: a refusal stays a refusal.
func TestAnUnknownBatchCommitIsUnknownForEach(t *testing.T) {
	ctx := fencetest.Context(t)
	monitor := database(t, 0).DB
	db := database(t, 1).DB
	s := newStore(t, db, postgres.Options{})
	var pid int
	if err := db.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	locker, x, held := heldBatch(t, s, monitor, "r", "s")
	terminate := postgres.WithStep(ctx, func(step string) {
		if step != "commit" {
			return
		}
		var gone bool
		if err := monitor.QueryRowContext(context.WithoutCancel(ctx), `SELECT pg_terminate_backend($1, 10000)`, pid).Scan(&gone); err != nil || !gone {
			t.Errorf("terminate the batch's backend: %v, %v", gone, err)
		}
	})
	wrong := held[0]
	wrong.Epoch++
	waits := []func() (leases.Lease, error){
		s.JoinRenewal(terminate, held[0], time.Minute), s.JoinRenewal(ctx, held[1], time.Minute),
		s.JoinRenewal(ctx, wrong, time.Minute),
	}
	if err := locker.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := x(); err != nil {
		t.Fatalf("the renewal in flight: %v", err)
	}
	for i, wait := range waits[:2] {
		if _, err := wait(); !errors.Is(err, leases.ErrOutcomeUnknown) {
			t.Errorf("renewal %d of the batch whose commit was lost: %v; want ErrOutcomeUnknown", i, err)
		}
	}
	if _, err := waits[2](); !errors.Is(err, leases.ErrNotHolder) || errors.Is(err, leases.ErrOutcomeUnknown) {
		t.Errorf("the refused renewal of that batch: %v; want ErrNotHolder, known", err)
	}
}

// A batch of renewals is one statement, committed on its own: no BEGIN,
// no second statement; and it reads the server's clock for each row after
// that row's lock: a renewal that waited for a lock counts its new expiry
// from after the wait, never from before it.
func TestABatchIsOneStatementThatReadsTheClockAfterEachLock(t *testing.T) {
	ctx := fencetest.Context(t)
	db := database(t, 0).DB
	s := newStore(t, db, postgres.Options{})
	locker, x, held := heldBatch(t, s, db, "r")
	waited := serverClock(t, db) // x is waiting for the row lock since before
	awaitServerClock(t, db, waited+1)
	if err := locker.Commit(); err != nil {
		t.Fatal(err)
	}
	if lease, err := x(); err != nil || lease.ExpiresAt < waited+1+time.Minute.Milliseconds() {
		t.Fatalf("the renewal that waited for its row's lock: %+v, %v; want it to expire a minute after tick %d or later, after the wait", lease, err, waited+1)
	}
	var steps []string
	counted := postgres.WithStep(ctx, func(step string) { steps = append(steps, step) })
	if _, err := s.JoinRenewal(counted, held[0], time.Minute)(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(steps, []string{"commit"}) {
		t.Fatalf("the statements of a batch: %q; want one, committed on its own", steps)
	}
}

// A short renewal of a long lease never brings the stored expiry
// earlier: the statement writes what rules.Renew decides, and another
// holder may not be granted the resource before the expiry its holder
// was given.
func TestAShortRenewalNeverShortensTheStoredLease(t *testing.T) {
	ctx := fencetest.Context(t)
	l := newStore(t, database(t, 0).DB, postgres.Options{}).Lessor()
	long, err := l.Acquire(ctx, "r", "A", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Renew(ctx, long, time.Second); err != nil {
		t.Fatal(err)
	}
	if stored, live, err := l.Lease(ctx, "r"); err != nil || !live || stored.ExpiresAt < long.ExpiresAt {
		t.Fatalf("the stored lease after a short renewal: %+v, %v, %v; want it to expire at %d or later", stored, live, err, long.ExpiresAt)
	}
}
