package fairtest

import (
	"errors"
	"testing"
	"time"

	"leases"
	"leases/testkit/testctx"
)

// CheckLine runs, on lessor, the order a store's Lessor grants a
// resource in, with no clock to move: a waiter refused while the lease
// was held is granted before the holder that releases and acquires again
// at once, and before a newcomer, who are both refused with the waiter
// named ahead of them; once the waiter has the lease, the next in line
// comes after it. ttl is long beside the test's calls (each decision is
// taken long before any lease or place could run out).
func CheckLine(t *testing.T, lessor leases.Lessor, ttl time.Duration) {
	t.Helper()
	ctx := testctx.Context(t)
	a, err := lessor.Acquire(ctx, "line", "A", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lessor.Acquire(ctx, "line", "B", ttl); !errors.Is(err, leases.ErrLeaseHeld) {
		t.Fatalf("B's acquire while A holds: %v; want ErrLeaseHeld", err)
	}
	if err := lessor.Release(ctx, a); err != nil {
		t.Fatal(err)
	}
	for _, holder := range []string{"A", "C"} {
		var queued *leases.HeldError
		_, err := lessor.Acquire(ctx, "line", holder, ttl)
		if !errors.As(err, &queued) || !queued.Queued || queued.Live.Holder != "B" {
			t.Fatalf("%s's acquire of the free lease B waits for: %v; want it kept for B, ahead in line", holder, err)
		}
	}
	b, err := lessor.Acquire(ctx, "line", "B", ttl)
	if err != nil {
		t.Fatalf("B, first in line: %v", err)
	}
	if err := lessor.Release(ctx, b); err != nil {
		t.Fatal(err)
	}
	var queued *leases.HeldError
	if _, err := lessor.Acquire(ctx, "line", "C", ttl); !errors.As(err, &queued) || queued.Live.Holder != "A" {
		t.Fatalf("C's acquire after B's release: %v; want it kept for A, refused first", err)
	}
	if _, err := lessor.Acquire(ctx, "line", "A", ttl); err != nil {
		t.Fatalf("A, first in line after B: %v", err)
	}
}
