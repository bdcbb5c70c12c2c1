package sqlite_test

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"leases"
	"leases/clock"
	"leases/testkit/testctx"
)

// The Lessor's listing (leasestest.Listing, in TestContract) is read at a
// tick of its own clock, and says so.
func TestLessorListsTheLiveLeases(t *testing.T) {
	host := clock.NewManual(1_000)
	lessor := lessorOn(t, filepath.Join(t.TempDir(), "leases.db"), host)
	if _, err := lessor.Acquire(testctx.Context(t), "r", "A", time.Second); err != nil {
		t.Fatal(err)
	}
	if err := host.Advance(1_500); err != nil {
		t.Fatal(err)
	}
	if live, now, err := lessor.Live(testctx.Context(t)); err != nil || now != host.Now() || len(live) != 1 {
		t.Fatalf("the listing: %+v at tick %d, %v; want A's lease, at the clock's tick %d", live, now, err, host.Now())
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
