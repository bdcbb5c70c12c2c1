package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"leases"
	"leases/postgres"
	"leases/session"
	"leases/testkit/fencetest"
)

// serverClock reads the server's clock as the store does: milliseconds
// since the Unix epoch.
func serverClock(t testing.TB, q interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}) int64 {
	t.Helper()
	var now int64
	if err := q.QueryRowContext(fencetest.Context(t),
		`SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint`).Scan(&now); err != nil {
		t.Fatal(err)
	}
	return now
}

// awaitServerClock returns once the server's clock has reached tick: it
// reads the clock until it says so (bounded by the test's deadline). The
// condition is the server's own clock, never a sleep of this process.
func awaitServerClock(t testing.TB, db *sql.DB, tick int64) {
	t.Helper()
	for serverClock(t, db) < tick {
	}
}

// The ticks of the leases are the server's clock, read inside each
// decision: a grant's tick lies between two readings of the server's
// clock taken around it, and the lease expires on that clock.
func TestTheLessorDecidesOnTheServersClock(t *testing.T) {
	ctx := fencetest.Context(t)
	db := database(t, 0).DB
	l := newStore(t, db, postgres.Options{}).Lessor()
	before := serverClock(t, db)
	// Long enough that the four calls below come before the expiry on a
	// loaded machine too.
	a, err := l.Acquire(ctx, "r", "A", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	after := serverClock(t, db)
	if a.GrantedAt < before || a.GrantedAt > after || a.ExpiresAt != a.GrantedAt+1000 || a.Epoch != 1 {
		t.Fatalf("granted %+v; want epoch 1, granted between the server's ticks %d and %d, for a second", a, before, after)
	}
	var held *leases.HeldError
	if _, err := l.Acquire(ctx, "r", "B", time.Second); !errors.As(err, &held) || held.Live != a || held.At < a.GrantedAt || held.At >= a.ExpiresAt {
		t.Fatalf("acquire while A holds: %v; want a HeldError with A's lease at a tick before its expiry", err)
	}
	if live, ok, err := l.Lease(ctx, "r"); err != nil || !ok || live != a {
		t.Fatalf("holder: %+v, %v, %v; want A's lease", live, ok, err)
	}
	renewed, err := l.Renew(ctx, a, 2*time.Second)
	if err != nil || renewed.Epoch != 1 || renewed.ExpiresAt < a.GrantedAt+2000 {
		t.Fatalf("renew: %+v, %v; want epoch 1 for two seconds from the renewal", renewed, err)
	}
	awaitServerClock(t, db, renewed.ExpiresAt)
	if _, ok, err := l.Lease(ctx, "r"); err != nil || ok {
		t.Fatalf("holder after the expiry: live %v, %v", ok, err)
	}
	if _, err := l.Renew(ctx, renewed, time.Second); !errors.Is(err, leases.ErrLeaseExpired) {
		t.Fatalf("renew after the expiry: %v; want ErrLeaseExpired", err)
	}
	b, err := l.Acquire(ctx, "r", "B", time.Second)
	if err != nil || b.Epoch != 2 || b.GrantedAt < renewed.ExpiresAt {
		t.Fatalf("acquire after the expiry: %+v, %v; want epoch 2, at or after tick %d", b, err, renewed.ExpiresAt)
	}
	if err := l.Release(ctx, a); !errors.Is(err, leases.ErrNotHolder) {
		t.Fatalf("A's release after B's grant: %v; want ErrNotHolder", err)
	}
	if err := l.Release(ctx, b); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Acquire(ctx, "r", "A", 0); !errors.Is(err, leases.ErrInvalidInput) {
		t.Fatalf("a time-to-live of 0: %v; want ErrInvalidInput", err)
	}
	if _, err := l.Acquire(ctx, "r", "A", time.Millisecond-1); !errors.Is(err, leases.ErrInvalidInput) {
		t.Fatalf("a time-to-live below a millisecond: %v; want ErrInvalidInput", err)
	}
}

// A decision reads the server's clock after it has the row's lock: a
// grant that waited for another transaction's lock is made at a tick no
// earlier than the server's clock when that transaction let go. Read
// before the lock, the tick would be the time the call began waiting.
func TestTheServerClockIsReadAfterTheLock(t *testing.T) {
	ctx := fencetest.Context(t)
	db := database(t, 0).DB
	s := newStore(t, db, postgres.Options{})
	l := s.Lessor()
	a, err := l.Acquire(ctx, "r", "A", time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	awaitServerClock(t, db, a.ExpiresAt)
	locker, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Rollback()
	if _, err := locker.ExecContext(ctx, `SELECT 1 FROM "`+s.Tables()[0]+`" WHERE resource = 'r' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	granted := make(chan leases.Lease, 1)
	failed := make(chan error, 1)
	go func() {
		b, err := l.Acquire(ctx, "r", "B", time.Second)
		if err != nil {
			failed <- err
			return
		}
		granted <- b
	}()
	awaitLockWait(t, db)
	let := serverClock(t, locker) + 5
	awaitServerClock(t, db, let) // the clock moves on while the grant waits
	if err := locker.Commit(); err != nil {
		t.Fatal(err)
	}
	select {
	case b := <-granted:
		if b.GrantedAt < let {
			t.Fatalf("granted at tick %d, before tick %d, when the lock was let go: the clock was read before the lock", b.GrantedAt, let)
		}
	case err := <-failed:
		t.Fatal(err)
	}
}

// A session on the server's clock works as on SQLite or etcd: Wait is
// granted once the holder's Do has released, learning of the release by
// its LISTEN (pgx's driver), well before the released lease would have expired;
// the epochs follow one another.
func TestSessionOnTheServersClock(t *testing.T) {
	ctx := fencetest.Context(t)
	s := newStore(t, database(t, 0).DB, postgres.Options{WatchInterval: time.Millisecond})
	holderSide := s.Lessor()
	waiterSide := &refusals{Lessor: sameStore(t, s, database(t, 0).DB, postgres.Options{WatchInterval: time.Millisecond}).Lessor(),
		refused: make(chan struct{}, 1)}
	// Without the watch B would be granted at the expiry, 5 s on.
	opts := session.Options{TTL: 5 * time.Second}
	inside, done := make(chan leases.Lease), make(chan struct{})
	doErr := make(chan error, 1)
	go func() {
		doErr <- session.Do(ctx, holderSide, "r", "A", opts, func(ctx context.Context, s *session.Session) error {
			inside <- s.Lease()
			<-done
			return s.Check()
		})
	}()
	a := <-inside
	waited := make(chan *session.Session, 1)
	waitErr := make(chan error, 1)
	go func() {
		b, err := session.Wait(ctx, waiterSide, "r", "B", opts)
		waitErr <- err
		waited <- b
	}()
	<-waiterSide.refused // B waits: A's lease is live
	close(done)          // A's work is done; Do releases
	if err := <-doErr; err != nil {
		t.Fatal(err)
	}
	if err := <-waitErr; err != nil {
		t.Fatal(err)
	}
	b := <-waited
	defer b.Close(ctx)
	if got := b.Lease(); got.Epoch != a.Epoch+1 || got.GrantedAt >= a.ExpiresAt {
		t.Fatalf("B holds %+v after A's %+v; want the next epoch, granted after the release and before A's expiry", got, a)
	}
	if err := b.Check(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := waiterSide.Lease(ctx, "r"); err != nil || ok {
		t.Fatalf("holder after B's Close: live %v, %v", ok, err)
	}
}

// refusals is a lessor that says when an acquire was refused: a waiter is
// then waiting.
type refusals struct {
	leases.Lessor
	refused chan struct{}
}

func (r *refusals) Acquire(ctx context.Context, resource, holder string, ttl time.Duration) (leases.Lease, error) {
	lease, err := r.Lessor.Acquire(ctx, resource, holder, ttl)
	if errors.Is(err, leases.ErrLeaseHeld) {
		select {
		case r.refused <- struct{}{}:
		default:
		}
	}
	return lease, err
}

// A release that finds no row for the resource waits for a first acquire
// of it that is still committing, and then releases the lease that
// acquire granted: a caller that releases what an acquire with an unknown
// outcome may have granted (session's OutcomeError) is not told that
// nothing is held while the grant can still come to life.
func TestAReleaseWaitsForAFirstAcquireStillCommitting(t *testing.T) {
	ctx := fencetest.Context(t)
	db := database(t, 0)
	store := newStore(t, db.DB, postgres.Options{})
	atCommit, commit := make(chan struct{}), make(chan struct{})
	held := postgres.WithStep(ctx, func(step string) {
		if step == "commit" {
			close(atCommit)
			<-commit
		}
	})
	type granted struct {
		lease leases.Lease
		err   error
	}
	acquired := make(chan granted, 1)
	go func() {
		lease, err := store.Lessor().Acquire(held, "first", "A", time.Minute)
		acquired <- granted{lease, err}
	}()
	<-atCommit // the first row is written, not committed
	wouldBe := leases.Lease{Resource: "first", Holder: "A", Epoch: 1}
	released := make(chan error, 1)
	go func() { released <- store.Lessor().Release(ctx, wouldBe) }()
	if !awaitLockWaitOr(t, db.DB, released, nil) {
		t.Fatalf("the release answered %v while the first acquire was still committing", <-released)
	}
	close(commit)
	if g := <-acquired; g.err != nil || g.lease.Epoch != 1 {
		t.Fatalf("the first acquire: %+v, %v", g.lease, g.err)
	}
	if err := <-released; err != nil {
		t.Fatalf("the release of the lease the first acquire granted: %v", err)
	}
	if lease, live, err := store.Lessor().Lease(ctx, "first"); err != nil || live {
		t.Fatalf("after the release: %+v live %v, %v; want nothing live", lease, live, err)
	}
}
