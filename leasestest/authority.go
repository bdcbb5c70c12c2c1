package leasestest

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"leases"
)

func checkEpochs(ctx context.Context, b Backend) error {
	return script(ctx, b, []step{
		{name: "A on alpha", op: "acquire", resource: "alpha", holder: "A", tick: 0, ttl: 2, want: leaseOf("alpha", "A", 1, 0, 2), save: "a1"},
		{name: "A on beta starts at 1 again", op: "acquire", resource: "beta", holder: "A", tick: 0, ttl: 3, want: leaseOf("beta", "A", 1, 0, 3)},
		{name: "B on alpha at A's expiry", op: "acquire", resource: "alpha", holder: "B", tick: 2, ttl: 2, want: leaseOf("alpha", "B", 2, 2, 4)},
		{name: "beta is still A's", op: "acquire", resource: "beta", holder: "B", tick: 2, ttl: 2, wantErr: leases.ErrLeaseHeld},
		{name: "C on alpha", op: "acquire", resource: "alpha", holder: "C", tick: 4, ttl: 2, want: leaseOf("alpha", "C", 3, 4, 6)},
		{name: "A back on alpha", op: "acquire", resource: "alpha", holder: "A", tick: 6, ttl: 2, want: leaseOf("alpha", "A", 4, 6, 8), save: "a4"},
		{name: "A's epoch-1 lease is not renewable", op: "renew", lease: "a1", tick: 6, ttl: 2, wantErr: leases.ErrNotHolder},
		{name: "nor releasable", op: "release", lease: "a1", tick: 6, wantErr: leases.ErrNotHolder},
		{name: "A's epoch-4 lease is", op: "renew", lease: "a4", tick: 7, ttl: 2, want: leaseOf("alpha", "A", 4, 6, 9)},
		{name: "B on beta later", op: "acquire", resource: "beta", holder: "B", tick: 9, ttl: 1, want: leaseOf("beta", "B", 2, 9, 10)},
	})
}

// checkExpiry: the same grant, A's at tick 10 for 5 ticks (live at 10 to
// 14), met by an acquire at each side of its expiry tick, 15.
func checkExpiry(ctx context.Context, b Backend) error {
	const grantedAt, ttl = 10, 5
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
	var errs []error
	for _, tc := range cases {
		err := func() error {
			a, err := acquire(ctx, b, tc.resource, "A", grantedAt, ttl)
			if err != nil {
				return err
			}
			before, err := snapshot(ctx, b)
			if err != nil {
				return err
			}
			lease, err := b.Authority.Acquire(ctx, tc.resource, tc.holder, tc.now, ttl)
			if tc.wantEpoch != 0 {
				if want := leaseOf(tc.resource, tc.holder, tc.wantEpoch, tc.now, tc.now+ttl); err != nil || lease != want {
					return fmt.Errorf("acquire at %d: %+v, %v; want %+v", tc.now, lease, err, want)
				}
				return nil
			}
			if err := held(err, a, tc.now); err != nil {
				return fmt.Errorf("acquire at %d: %w", tc.now, err)
			}
			return unchanged(ctx, b, before, "the refused acquire")
		}()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", tc.name, err))
		}
	}
	return errors.Join(errs...)
}

// held is an error unless err is the refusal of an acquire at tick at
// while live is live: a *leases.HeldError with both, whose message names
// the holder and the expiry tick.
func held(err error, live leases.Lease, at int64) error {
	var h *leases.HeldError
	if !errors.As(err, &h) || !errors.Is(err, leases.ErrLeaseHeld) || !leases.IsRefusal(err) {
		return fmt.Errorf("%v; want a *leases.HeldError matching ErrLeaseHeld", err)
	}
	if h.Live != live || h.At != at {
		return fmt.Errorf("HeldError of %+v at tick %d; want %+v at tick %d", h.Live, h.At, live, at)
	}
	if msg := err.Error(); !strings.Contains(msg, fmt.Sprintf("%q", live.Holder)) || !strings.Contains(msg, fmt.Sprintf("until tick %d", live.ExpiresAt)) {
		return fmt.Errorf("refusal %q; want it to name the holder %q and its expiry, \"until tick %d\"", msg, live.Holder, live.ExpiresAt)
	}
	return nil
}

func checkRenewal(ctx context.Context, b Backend) error {
	return script(ctx, b, []step{
		{name: "A acquires r", op: "acquire", resource: "r", holder: "A", tick: 0, ttl: 3, want: leaseOf("r", "A", 1, 0, 3), save: "a"},
		{name: "B acquires other", op: "acquire", resource: "other", holder: "B", tick: 0, ttl: 3, want: leaseOf("other", "B", 1, 0, 3)},
		{name: "A renews", op: "renew", lease: "a", tick: 2, ttl: 3, want: leaseOf("r", "A", 1, 0, 5), save: "a"},
		{name: "r is held at its old expiry tick", op: "acquire", resource: "r", holder: "B", tick: 3, ttl: 3, wantErr: leases.ErrLeaseHeld},
		{name: "other was not renewed", op: "acquire", resource: "other", holder: "C", tick: 3, ttl: 3, want: leaseOf("other", "C", 2, 3, 6)},
		{name: "a long renewal", op: "renew", lease: "a", tick: 4, ttl: 10, want: leaseOf("r", "A", 1, 0, 14), save: "a"},
		{name: "a short renewal never moves the expiry earlier", op: "renew", lease: "a", tick: 5, ttl: 1, want: leaseOf("r", "A", 1, 0, 14), save: "a"},
		{name: "r is held until tick 14", op: "acquire", resource: "r", holder: "B", tick: 13, ttl: 3, wantErr: leases.ErrLeaseHeld},
		{name: "a tick before the last renewal", op: "renew", lease: "a", tick: 4, ttl: 3, wantErr: leases.ErrTickBackwards},
		{name: "another holder cannot renew", op: "renew", lease: "~a", tick: 13, ttl: 3, wantErr: leases.ErrNotHolder},
		{name: "not at the expiry tick", op: "renew", lease: "a", tick: 14, ttl: 3, wantErr: leases.ErrLeaseExpired},
		{name: "B takes r at the expiry tick", op: "acquire", resource: "r", holder: "B", tick: 14, ttl: 3, want: leaseOf("r", "B", 2, 14, 17)},
		{name: "nor after a new grant", op: "renew", lease: "a", tick: 15, ttl: 3, wantErr: leases.ErrNotHolder},
	})
}

func checkRelease(ctx context.Context, b Backend) error {
	return script(ctx, b, []step{
		{name: "A acquires r", op: "acquire", resource: "r", holder: "A", tick: 0, ttl: 100, want: leaseOf("r", "A", 1, 0, 100), save: "a"},
		{name: "A acquires other", op: "acquire", resource: "other", holder: "A", tick: 0, ttl: 100, want: leaseOf("other", "A", 1, 0, 100)},
		{name: "another holder cannot release", op: "release", lease: "~a", tick: 1, wantErr: leases.ErrNotHolder},
		{name: "A releases r", op: "release", lease: "a", tick: 5},
		{name: "other is still held", op: "acquire", resource: "other", holder: "B", tick: 5, ttl: 2, wantErr: leases.ErrLeaseHeld},
		{name: "a tick before the release", op: "acquire", resource: "r", holder: "B", tick: 4, ttl: 2, wantErr: leases.ErrTickBackwards},
		{name: "a second release", op: "release", lease: "a", tick: 5, wantErr: leases.ErrNotHolder},
		{name: "nor a renewal", op: "renew", lease: "a", tick: 5, ttl: 2, wantErr: leases.ErrNotHolder},
		{name: "B at the release tick, a new epoch", op: "acquire", resource: "r", holder: "B", tick: 5, ttl: 2, want: leaseOf("r", "B", 2, 5, 7), save: "b"},
		{name: "an expired lease", op: "release", lease: "b", tick: 7, wantErr: leases.ErrLeaseExpired},
		{name: "A again, never epoch 1 or 2", op: "acquire", resource: "r", holder: "A", tick: 7, ttl: 2, want: leaseOf("r", "A", 3, 7, 9)},
	})
}

// checkQuery: Lease answers the live lease at a tick, and nothing before
// the grant, at and after the expiry, or after a release; a renewal
// shows; other resources are apart; Live lists what Lease answers; both
// change nothing.
func checkQuery(ctx context.Context, b Backend) error {
	none := leases.Lease{}
	query := func(resource string, now int64, want leases.Lease) error {
		before, err := snapshot(ctx, b)
		if err != nil {
			return err
		}
		got, live, err := b.Authority.Lease(ctx, resource, now)
		if err != nil || live != (want != none) || got != want {
			return fmt.Errorf("lease of %s at %d: %+v, live %v, %v; want %+v, live %v", resource, now, got, live, err, want, want != none)
		}
		listed, err := b.Authority.Live(ctx, now, resource, "never-leased")
		if err != nil || (want == none) != (len(listed) == 0) || (want != none && (len(listed) != 1 || listed[0] != want)) {
			return fmt.Errorf("live of %s at %d: %+v, %v; want what Lease answers, %+v", resource, now, listed, err, want)
		}
		return unchanged(ctx, b, before, "a query")
	}
	a, err := acquire(ctx, b, "r", "A", 2, 3)
	if err != nil {
		return err
	}
	steps := []func() error{
		func() error { return query("r", 2, a) },
		func() error { return query("r", 4, a) },
		func() error { return query("r", 5, none) },
		func() error { return query("other", 3, none) },
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return err
		}
	}
	renewed, err := b.Authority.Renew(ctx, a, 4, 3)
	if err != nil {
		return fmt.Errorf("renew: %w", err)
	}
	if err := query("r", 6, renewed); err != nil {
		return err
	}
	if all, err := b.Authority.Live(ctx, 6); err != nil || len(all) != 1 || all[0] != renewed {
		return fmt.Errorf("every live lease at 6: %+v, %v; want %+v alone", all, err, renewed)
	}
	if err := b.Authority.Release(ctx, renewed, 6); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	return query("r", 6, none)
}

// step is one call in a scripted run of an authority and what it must
// give. Scripts interleave two resources, so that every step also shows
// it left the other alone.
type step struct {
	name     string
	op       string // "acquire", "renew" or "release"
	resource string // acquire
	holder   string // acquire
	lease    string // renew, release: the saved lease to use; "~x" is x with holder "B"
	tick     int64
	ttl      int64 // acquire, renew
	want     leases.Lease
	wantErr  error  // the sentinel the call must match; nil: it must succeed
	save     string // keep the lease the call returns under this name
}

// script runs steps in order against b's authority, and stops at the
// first that fails. A refused step must leave the store as it was.
func script(ctx context.Context, b Backend, steps []step) error {
	saved := map[string]leases.Lease{}
	for i, s := range steps {
		held := saved[strings.TrimPrefix(s.lease, "~")]
		if strings.HasPrefix(s.lease, "~") {
			held.Holder = "B"
		}
		before, err := snapshot(ctx, b)
		if err != nil {
			return err
		}
		got, err := s.run(ctx, b.Authority, held)
		switch {
		case s.wantErr != nil:
			if !errors.Is(err, s.wantErr) || !leases.IsRefusal(err) || got != (leases.Lease{}) {
				return fmt.Errorf("step %d (%s): %+v, %v; want no lease and a refusal matching %v", i+1, s.name, got, err, s.wantErr)
			}
			if err := unchanged(ctx, b, before, "the refusal"); err != nil {
				return fmt.Errorf("step %d (%s): %w", i+1, s.name, err)
			}
		case err != nil:
			return fmt.Errorf("step %d (%s): %w", i+1, s.name, err)
		case s.op != "release" && got != s.want:
			return fmt.Errorf("step %d (%s): got %+v, want %+v", i+1, s.name, got, s.want)
		}
		if s.save != "" {
			saved[s.save] = got
		}
	}
	return nil
}

// run is the step's call of a, with held the lease it renews or
// releases.
func (s step) run(ctx context.Context, a leases.Authority, held leases.Lease) (leases.Lease, error) {
	switch s.op {
	case "acquire":
		return a.Acquire(ctx, s.resource, s.holder, s.tick, s.ttl)
	case "renew":
		return a.Renew(ctx, held, s.tick, s.ttl)
	case "release":
		return leases.Lease{}, a.Release(ctx, held, s.tick)
	}
	return leases.Lease{}, fmt.Errorf("unknown operation %q", s.op)
}
