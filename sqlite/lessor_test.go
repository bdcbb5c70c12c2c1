package sqlite_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"leases"
	"leases/clock"
	"leases/testkit/testctx"
)

// The Lessor decides on the host's clock, read inside each decision's
// transaction: callers say how long, never what time it is. Two stores on
// one file whose clocks disagree (one is behind, as a clock stepped back
// is) never see a tick run backwards: a decision is never earlier than
// the lease's last change.
func TestLessorDecidesOnTheHostsClock(t *testing.T) {
	ctx := testctx.Context(t)
	path := filepath.Join(t.TempDir(), "leases.db")
	host := clock.NewManual(1_000)
	behind := clock.NewManual(0)
	a, b := lessorOn(t, path, host), lessorOn(t, path, behind)

	held, err := a.Acquire(ctx, "r", "A", 100*time.Millisecond)
	if err != nil || held.GrantedAt != 1_000 || held.ExpiresAt != 1_100 || held.Epoch != 1 {
		t.Fatalf("acquire at the host's 1000: %+v, %v; want epoch 1 from 1000 to 1100", held, err)
	}
	var refused *leases.HeldError
	if _, err := b.Acquire(ctx, "r", "B", 100*time.Millisecond); !errors.As(err, &refused) || refused.At != 1_000 {
		t.Fatalf("acquire on a clock behind the last change: %v; want ErrLeaseHeld decided at the last change's tick", err)
	}
	if err := host.Advance(1_050); err != nil {
		t.Fatal(err)
	}
	renewed, err := a.Renew(ctx, held, 100*time.Millisecond)
	if err != nil || renewed.ExpiresAt != 1_150 {
		t.Fatalf("renew at 1050: %+v, %v; want expiry 1150", renewed, err)
	}
	if live, ok, err := b.Lease(ctx, "r"); err != nil || !ok || live != renewed {
		t.Fatalf("holder on the clock behind: %+v, %v, %v; want A's renewed lease", live, ok, err)
	}
	if err := host.Advance(1_150); err != nil {
		t.Fatal(err)
	}
	// B, refused before, is first in line: the free lease is kept for it.
	next, err := a.Acquire(ctx, "r", "B", 100*time.Millisecond)
	if err != nil || next.Epoch != 2 || next.GrantedAt != 1_150 {
		t.Fatalf("acquire at the expiry: %+v, %v; want epoch 2 at 1150", next, err)
	}
	if err := b.Release(ctx, next); err != nil { // decided at 1150, the last change, not at 0
		t.Fatalf("release on the clock behind: %v", err)
	}
	if err := a.Release(ctx, next); !errors.Is(err, leases.ErrNotHolder) || !strings.Contains(err.Error(), "epoch 2 of \"r\" was released at tick 1150") {
		t.Fatalf("a second release: %v; want ErrNotHolder saying the epoch was released", err)
	}
	if _, err := a.Acquire(ctx, "r", "A", 0); !errors.Is(err, leases.ErrInvalidInput) {
		t.Fatalf("a TTL of 0: %v; want ErrInvalidInput", err)
	}
}
