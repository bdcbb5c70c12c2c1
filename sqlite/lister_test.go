package sqlite_test

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"leases"
	"leases/clock"
	"leases/testkit/contract"
	"leases/testkit/testctx"
)

// The Lessor lists the live leases on its own clock, as Holder sees them
// (contract.Lister), and the tick it returns is that clock's.
func TestLessorListsTheLiveLeases(t *testing.T) {
	host := clock.NewManual(1_000)
	lessor := lessorOn(t, filepath.Join(t.TempDir(), "leases.db"), host)
	contract.Lister(t, testctx.Context(t), lessor, func(l leases.Lease) {
		if err := host.Advance(l.ExpiresAt); err != nil {
			t.Fatal(err)
		}
	})
	if _, now, err := lessor.Live(testctx.Context(t)); err != nil || now != host.Now() {
		t.Fatalf("the listing's tick: %d, %v; want the clock's, %d", now, err, host.Now())
	}
}

// A store whose clock is behind a lease's last change decides, as Holder
// does, at the last change: the lease is live there, and the tick
// returned is the store's own clock's.
func TestLessorListsOnAClockBehind(t *testing.T) {
	ctx := testctx.Context(t)
	path := filepath.Join(t.TempDir(), "leases.db")
	a, err := lessorOn(t, path, clock.NewManual(1_000)).Acquire(ctx, "a", "A", 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	behind := lessorOn(t, path, clock.NewManual(500))
	if live, now, err := behind.Live(ctx, "a"); err != nil || now != 500 || !slices.Equal(live, []leases.Lease{a}) {
		t.Fatalf("on a clock behind: %+v at %d, %v; want a, read at 500", live, now, err)
	}
}
