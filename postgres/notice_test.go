package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"leases"
	"leases/postgres"
	"leases/testkit/fencetest"
)

// The Lessor's acquire whose COMMIT is cut off (its backend terminated
// with the COMMIT under way) has an unknown outcome, as the Authority's
// has, and returns the lease it would have granted, on the server's
// ticks, for the caller to release or to find out about; nothing was
// committed, and the store goes on.
func TestLessorAcquireWhoseCommitIsCutOffReturnsTheLease(t *testing.T) {
	ctx := fencetest.Context(t)
	monitor := database(t, 0).DB
	store := newStore(t, monitor, postgres.Options{})
	before := dump(t, monitor, store)
	db := database(t, 1).DB
	const ttl = 5 * time.Second
	lease, err := sameStore(t, store, db, postgres.Options{}).Lessor().Acquire(faultAt(t, ctx, monitor, db, "commit", "terminate"), "r", "A", ttl)
	if !errors.Is(err, leases.ErrOutcomeUnknown) || leases.IsRefusal(err) {
		t.Fatalf("an acquire whose COMMIT was cut off: %v; want an unknown outcome", err)
	}
	if lease.Resource != "r" || lease.Holder != "A" || lease.Epoch != 1 || lease.GrantedAt <= 0 ||
		lease.ExpiresAt-lease.GrantedAt != ttl.Milliseconds() || lease.Ticks != leases.ServerMillis {
		t.Fatalf("the acquire returned %+v with its unknown outcome; want A's lease of epoch 1 for %v on the server's ticks", lease, ttl)
	}
	if after := dump(t, monitor, store); after != before {
		t.Fatalf("the store changed:\n%s\nbecame\n%s", before, after)
	}
	if b, err := store.Lessor().Acquire(ctx, "r", "B", ttl); err != nil || b.Epoch != 1 {
		t.Fatalf("the next acquire: %+v, %v; want epoch 1", b, err)
	}
}

// A lease of epoch 0 was never granted: renewing or releasing it is
// invalid input, checked before anything is sent, not a decision on what
// the store holds (not the holder), and the lease that is held stays as
// it was.
func TestLessorRefusesAnEpochZeroLeaseAsInvalidInput(t *testing.T) {
	ctx := fencetest.Context(t)
	db := database(t, 0).DB
	store := newStore(t, db, postgres.Options{})
	lessor := store.Lessor()
	held, err := lessor.Acquire(ctx, "r", "A", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	before := dump(t, db, store)
	zero := held
	zero.Epoch = 0
	for name, call := range map[string]func() error{
		"renew": func() error {
			_, err := lessor.Renew(ctx, zero, time.Hour)
			return err
		},
		"release": func() error { return lessor.Release(ctx, zero) },
	} {
		if err := call(); !errors.Is(err, leases.ErrInvalidInput) || errors.Is(err, leases.ErrNotHolder) {
			t.Errorf("%s a lease of epoch 0: %v; want invalid input", name, err)
		}
	}
	if after := dump(t, db, store); after != before {
		t.Fatalf("the store changed:\n%s\nbecame\n%s", before, after)
	}
}

// A serialization failure is PostgreSQL's 40001 or 40P01, however
// wrapped; any other SQLSTATE, and an error without one, is not (the
// store would take it for a transaction to try again).
func TestIsSerializationFailure(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&pgconn.PgError{Code: "40001"}, true},
		{&pgconn.PgError{Code: "40P01"}, true},
		{fmt.Errorf("commit: %w", &pgconn.PgError{Code: "40001"}), true},
		{&pgconn.PgError{Code: "40002"}, false}, // transaction_integrity_constraint_violation
		{&pgconn.PgError{Code: "40003"}, false}, // statement_completion_unknown
		{&pgconn.PgError{Code: "25P03"}, false}, // idle_in_transaction_session_timeout
		{&pgconn.PgError{Code: "23505"}, false}, // unique_violation
		{&pgconn.PgError{}, false},
		{errors.New("40001"), false},
		{context.Canceled, false},
		{nil, false},
	} {
		if got := postgres.IsSerializationFailure(c.err); got != c.want {
			t.Errorf("IsSerializationFailure(%v) = %v; want %v", c.err, got, c.want)
		}
	}
}

// The change watch that reads the row (the Authority's, and the Lessor's
// where the driver cannot LISTEN) stays open while the resource's row
// does not change:
// it reads the row again and again (four waits seen: at least two reads
// after the one at the call) without closing.
func TestChangedStaysOpenWhileTheRowIsUnchanged(t *testing.T) {
	ctx := fencetest.Context(t)
	db := database(t, 0).DB
	store := newStore(t, db, postgres.Options{WatchInterval: time.Millisecond})
	lessor := store.Lessor()
	if _, err := lessor.Acquire(ctx, "r", "A", time.Hour); err != nil {
		t.Fatal(err)
	}
	changed, err := store.Authority().Changed(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	if waits := watchWaits(t, db, store, changed, 4); waits < 4 {
		t.Fatalf("the watch closed after %d waits of its reads of an unchanged row", waits)
	}
}

// A release right after the watch began, before its first read, closes
// it: the watch compares with the row as it was when Changed was called,
// not as its first read finds it.
func TestChangedClosesOnAReleaseRightAfterTheCall(t *testing.T) {
	ctx := fencetest.Context(t)
	db := database(t, 0).DB
	store := newStore(t, db, postgres.Options{WatchInterval: time.Millisecond})
	lessor := store.Lessor()
	held, err := lessor.Acquire(ctx, "r", "A", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	changed, err := store.Authority().Changed(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	if err := lessor.Release(ctx, held); err != nil {
		t.Fatal(err)
	}
	// The first wait after the release may be of a read that began
	// before it; the next read begun after that one ended read the
	// released row: three waits at most, then the watch closes.
	if waits := watchWaits(t, db, store, changed, 4); waits > 3 {
		t.Fatalf("the watch stayed open through %d waits of its reads after the release", waits)
	}
}

// watchWaits counts the waits of a watch's reads of the store's lease
// table, up to n, and returns how many it saw before the watch closed:
// the test holds a lock of the whole table until a read waits for it,
// then lets go. A read waits once, or twice when the driver prepares its
// statement first (on the first use on a connection). The reads are told
// by the server, not by a clock.
func watchWaits(t *testing.T, db *sql.DB, store *postgres.Store, changed <-chan struct{}, n int) int {
	t.Helper()
	ctx := fencetest.Context(t)
	table := store.Tables()[0]
	for waits := 0; waits < n; waits++ {
		lock, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var pid int
		if err := lock.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
			t.Fatal(err)
		}
		if _, err := lock.ExecContext(ctx, `LOCK TABLE "`+table+`" IN ACCESS EXCLUSIVE MODE`); err != nil {
			t.Fatal(err)
		}
		waiting := false
		for !waiting {
			select {
			case <-changed:
				_ = lock.Rollback()
				return waits
			default:
			}
			if err := db.QueryRowContext(ctx, `SELECT count(*) > 0 FROM pg_locks WHERE relation = $1::regclass AND NOT granted AND pid <> $2`,
				`"`+table+`"`, pid).Scan(&waiting); err != nil {
				t.Fatal(err)
			}
		}
		if err := lock.Rollback(); err != nil {
			t.Fatal(err)
		}
	}
	return n
}
