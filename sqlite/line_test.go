package sqlite_test

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"leases"
	"leases/clock"
	"leases/testkit/fairtest"
	"leases/testkit/testctx"
)

// The Lessor grants a resource to its waiters in the order they were
// first refused.
func TestLessorGrantsInArrivalOrder(t *testing.T) {
	fairtest.CheckLine(t, lessorOn(t, filepath.Join(t.TempDir(), "leases.db"), clock.Wall{}), time.Hour)
}

// A waiter that went away holds the free lease back until its place
// ends: the end of the lease that refused it, plus its own time-to-live;
// then the next caller is granted.
func TestLessorPlaceInLineEnds(t *testing.T) {
	ctx := testctx.Context(t)
	clk := clock.NewManual(1_000)
	l := lessorOn(t, filepath.Join(t.TempDir(), "leases.db"), clk)
	a, err := l.Acquire(ctx, "r", "A", 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Acquire(ctx, "r", "B", 50*time.Millisecond); !errors.Is(err, leases.ErrLeaseHeld) {
		t.Fatalf("B while A holds: %v; want ErrLeaseHeld", err)
	}
	if err := l.Release(ctx, a); err != nil {
		t.Fatal(err)
	}
	var queued *leases.HeldError
	if _, err := l.Acquire(ctx, "r", "C", 100*time.Millisecond); !errors.As(err, &queued) || queued.Live.ExpiresAt != 1_150 {
		t.Fatalf("C at 1000: %v; want the lease kept for B until 1150 (A's expiry, 1100, and B's TTL)", err)
	}
	if err := clk.Advance(1_150); err != nil {
		t.Fatal(err)
	}
	if c, err := l.Acquire(ctx, "r", "C", 100*time.Millisecond); err != nil || c.GrantedAt != 1_150 {
		t.Fatalf("C at 1150: %+v, %v; want a grant: B's place has ended", c, err)
	}
}
