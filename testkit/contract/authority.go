package contract

import (
	"context"
	"errors"
	"strings"
	"testing"

	"leases"
)

// EpochsIncreasePerResource: epochs strictly increase per resource,
// resources do not share a sequence, and a holder that comes back gets a new epoch, its old lease
// no longer its own.
func EpochsIncreasePerResource(t *testing.T, b Backend) {
	script(t, b, []step{
		{name: "A on alpha", op: "acquire", resource: "alpha", holder: "A", tick: 0, ttl: 2, want: LeaseOf("alpha", "A", 1, 0, 2), save: "a1"},
		{name: "A on beta starts at 1 again", op: "acquire", resource: "beta", holder: "A", tick: 0, ttl: 3, want: LeaseOf("beta", "A", 1, 0, 3)},
		{name: "B on alpha at A's expiry", op: "acquire", resource: "alpha", holder: "B", tick: 2, ttl: 2, want: LeaseOf("alpha", "B", 2, 2, 4)},
		{name: "beta is still A's", op: "acquire", resource: "beta", holder: "B", tick: 2, ttl: 2, wantErr: leases.ErrLeaseHeld},
		{name: "C on alpha", op: "acquire", resource: "alpha", holder: "C", tick: 4, ttl: 2, want: LeaseOf("alpha", "C", 3, 4, 6)},
		{name: "A back on alpha", op: "acquire", resource: "alpha", holder: "A", tick: 6, ttl: 2, want: LeaseOf("alpha", "A", 4, 6, 8), save: "a4"},
		{name: "A's epoch-1 lease is not renewable", op: "renew", lease: "a1", tick: 6, ttl: 2, wantErr: leases.ErrNotHolder},
		{name: "nor releasable", op: "release", lease: "a1", tick: 6, wantErr: leases.ErrNotHolder},
		{name: "A's epoch-4 lease is", op: "renew", lease: "a4", tick: 7, ttl: 2, want: LeaseOf("alpha", "A", 4, 6, 9)},
		{name: "B on beta later", op: "acquire", resource: "beta", holder: "B", tick: 9, ttl: 1, want: LeaseOf("beta", "B", 2, 9, 10)},
	})
}

// ExpiryBoundary: a lease granted at t for d ticks is live at t+d-1 and
// expired at t+d;
// the refusal names the holder and the expiry tick.
func ExpiryBoundary(t *testing.T, b Backend) {
	const grantedAt, ttl = 10, 5 // expires at tick 15
	ctx := context.Background()
	cases := []struct {
		name      string
		resource  string
		holder    string
		now       int64
		wantEpoch int64 // 0: refused
	}{
		{"another holder one tick before expiry", "r1", "B", grantedAt + ttl - 1, 0},
		{"another holder at the grant tick", "r2", "B", grantedAt, 0},
		{"the same holder before expiry", "r3", "A", grantedAt + ttl - 1, 0},
		{"another holder at exactly the expiry tick", "r4", "B", grantedAt + ttl, 2},
		{"the same holder at the expiry tick", "r5", "A", grantedAt + ttl, 2},
		{"another holder long after expiry", "r6", "B", grantedAt + 10*ttl, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := b.Authority.Acquire(ctx, tc.resource, "A", grantedAt, ttl); err != nil {
				t.Fatal(err)
			}
			lease, err := b.Authority.Acquire(ctx, tc.resource, tc.holder, tc.now, ttl)
			if tc.wantEpoch == 0 {
				if !errors.Is(err, leases.ErrLeaseHeld) {
					t.Fatalf("acquire at %d: got %+v, %v; want ErrLeaseHeld", tc.now, lease, err)
				}
				if msg := err.Error(); !strings.Contains(msg, `"A"`) || !strings.Contains(msg, "until tick 15") {
					t.Errorf("refusal %q should name the holder and its expiry tick", msg)
				}
				return
			}
			if want := LeaseOf(tc.resource, tc.holder, tc.wantEpoch, tc.now, tc.now+ttl); err != nil || lease != want {
				t.Fatalf("acquire at %d: got %+v, %v; want %+v", tc.now, lease, err, want)
			}
		})
	}
}

// RenewExtendsOnlyTheHoldersLiveLease: renewal extends the holder's live
// lease under the same epoch and grant tick, never to an earlier expiry; nobody else can renew it, an expired
// lease cannot be renewed, and a renewal leaves other resources alone.
func RenewExtendsOnlyTheHoldersLiveLease(t *testing.T, b Backend) {
	script(t, b, []step{
		{name: "A acquires r", op: "acquire", resource: "r", holder: "A", tick: 0, ttl: 3, want: LeaseOf("r", "A", 1, 0, 3), save: "a"},
		{name: "B acquires other", op: "acquire", resource: "other", holder: "B", tick: 0, ttl: 3, want: LeaseOf("other", "B", 1, 0, 3)},
		{name: "A renews", op: "renew", lease: "a", tick: 2, ttl: 3, want: LeaseOf("r", "A", 1, 0, 5), save: "a"},
		{name: "r is held at its old expiry tick", op: "acquire", resource: "r", holder: "B", tick: 3, ttl: 3, wantErr: leases.ErrLeaseHeld},
		{name: "other was not renewed", op: "acquire", resource: "other", holder: "C", tick: 3, ttl: 3, want: LeaseOf("other", "C", 2, 3, 6)},
		{name: "a long renewal", op: "renew", lease: "a", tick: 4, ttl: 10, want: LeaseOf("r", "A", 1, 0, 14), save: "a"},
		{name: "a short renewal never moves the expiry earlier", op: "renew", lease: "a", tick: 5, ttl: 1, want: LeaseOf("r", "A", 1, 0, 14), save: "a"},
		{name: "r is held until tick 14", op: "acquire", resource: "r", holder: "B", tick: 13, ttl: 3, wantErr: leases.ErrLeaseHeld},
		{name: "a tick before the last renewal", op: "renew", lease: "a", tick: 4, ttl: 3, wantErr: leases.ErrTickBackwards},
		{name: "another holder cannot renew", op: "renew", lease: "~a", tick: 13, ttl: 3, wantErr: leases.ErrNotHolder},
		{name: "not at the expiry tick", op: "renew", lease: "a", tick: 14, ttl: 3, wantErr: leases.ErrLeaseExpired},
		{name: "B takes r at the expiry tick", op: "acquire", resource: "r", holder: "B", tick: 14, ttl: 3, want: LeaseOf("r", "B", 2, 14, 17)},
		{name: "nor after a new grant", op: "renew", lease: "a", tick: 15, ttl: 3, wantErr: leases.ErrNotHolder},
	})
}

// ReleaseNeverReusesEpoch: release frees the resource at once and only
// that resource, but its epoch is never handed out again.
func ReleaseNeverReusesEpoch(t *testing.T, b Backend) {
	script(t, b, []step{
		{name: "A acquires r", op: "acquire", resource: "r", holder: "A", tick: 0, ttl: 100, want: LeaseOf("r", "A", 1, 0, 100), save: "a"},
		{name: "A acquires other", op: "acquire", resource: "other", holder: "A", tick: 0, ttl: 100, want: LeaseOf("other", "A", 1, 0, 100)},
		{name: "another holder cannot release", op: "release", lease: "~a", tick: 1, wantErr: leases.ErrNotHolder},
		{name: "A releases r", op: "release", lease: "a", tick: 5},
		{name: "other is still held", op: "acquire", resource: "other", holder: "B", tick: 5, ttl: 2, wantErr: leases.ErrLeaseHeld},
		{name: "a tick before the release", op: "acquire", resource: "r", holder: "B", tick: 4, ttl: 2, wantErr: leases.ErrTickBackwards},
		{name: "a second release", op: "release", lease: "a", tick: 5, wantErr: leases.ErrNotHolder},
		{name: "nor a renewal", op: "renew", lease: "a", tick: 5, ttl: 2, wantErr: leases.ErrNotHolder},
		{name: "B at the release tick, a new epoch", op: "acquire", resource: "r", holder: "B", tick: 5, ttl: 2, want: LeaseOf("r", "B", 2, 5, 7), save: "b"},
		{name: "an expired lease", op: "release", lease: "b", tick: 7, wantErr: leases.ErrLeaseExpired},
		{name: "A again, never epoch 1 or 2", op: "acquire", resource: "r", holder: "A", tick: 7, ttl: 2, want: LeaseOf("r", "A", 3, 7, 9)},
	})
}

// HolderAnswersWhoHolds: a holder query answers the live lease at a tick,
// and nothing before the grant, at and after the expiry, or after a
// release; a renewal shows; other resources are apart; it changes nothing.
func HolderAnswersWhoHolds(t *testing.T, b Backend) {
	ctx := context.Background()
	holder := func(resource string, now int64, want leases.Lease, wantLive bool) {
		t.Helper()
		before := b.State(t)
		got, live, err := b.Authority.Lease(ctx, resource, now)
		if err != nil || live != wantLive || got != want {
			t.Fatalf("holder of %s at %d: %+v, live %v, %v; want %+v, live %v", resource, now, got, live, err, want, wantLive)
		}
		if after := b.State(t); after != before {
			t.Fatalf("a holder query changed the store:\n%s\nbecame\n%s", before, after)
		}
	}
	holder("r", 0, leases.Lease{}, false)
	a, err := b.Authority.Acquire(ctx, "r", "A", 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	holder("r", 2, a, true)
	holder("r", 4, a, true)
	holder("r", 5, leases.Lease{}, false)
	holder("other", 3, leases.Lease{}, false)
	renewed, err := b.Authority.Renew(ctx, a, 4, 3)
	if err != nil {
		t.Fatal(err)
	}
	holder("r", 6, renewed, true)
	if err := b.Authority.Release(ctx, renewed, 6); err != nil {
		t.Fatal(err)
	}
	holder("r", 6, leases.Lease{}, false)
	if _, _, err := b.Authority.Lease(ctx, "", 6); !errors.Is(err, leases.ErrInvalidInput) {
		t.Fatalf("holder of an empty name: %v, want ErrInvalidInput", err)
	}
	if _, _, err := b.Authority.Lease(ctx, "r", -1); !errors.Is(err, leases.ErrInvalidInput) {
		t.Fatalf("holder at a negative tick: %v, want ErrInvalidInput", err)
	}
}
