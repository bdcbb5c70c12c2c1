package leasestest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"leases"
	"leases/fence"
)

// tenures grants the leases of the tenure clause, from the Lessor, or
// from the Authority on ticks of its own when the backend has no Lessor,
// and runs the tenures' transactions.
type tenures struct {
	ctx  context.Context
	b    Backend
	tick int64 // the Authority's next tick
}

// grant is a lease on resource for holder, live for an hour (of ticks).
func (g *tenures) grant(resource, holder string) (leases.Lease, error) {
	if g.b.Lessor != nil {
		return g.b.Lessor.Acquire(g.ctx, resource, holder, time.Hour)
	}
	g.tick++
	return g.b.Authority.Acquire(g.ctx, resource, holder, g.tick, time.Hour.Milliseconds())
}

// release ends held.
func (g *tenures) release(held leases.Lease) error {
	if g.b.Lessor != nil {
		return g.b.Lessor.Release(g.ctx, held)
	}
	g.tick++
	return g.b.Authority.Release(g.ctx, held, g.tick)
}

// tx runs one transaction of tn, its work Backend.Work, and says whether
// its function ran.
func (g *tenures) tx(tn *fence.Tenure) (ran bool, err error) {
	err = tn.Tx(g.ctx, nil, func(tx *sql.Tx) error {
		ran = true
		if g.b.Work == nil {
			return nil
		}
		return g.b.Work(g.ctx, tx, tn.Lease())
	})
	return ran, err
}

// commits is an error unless a transaction of tn commits and shows in
// the store's state.
func (g *tenures) commits(what string, tn *fence.Tenure) error {
	before, err := snapshot(g.ctx, g.b)
	if err != nil {
		return err
	}
	if _, err := g.tx(tn); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := unchanged(g.ctx, g.b, before, what); err == nil {
		return fmt.Errorf("%s committed and the store's state shows nothing of it: State must render the guard's tables", what)
	}
	return nil
}

// refuses is an error unless a transaction of tn is refused before its
// function runs, with an error that check accepts, and changes nothing.
func (g *tenures) refuses(what string, tn *fence.Tenure, check func(error) error) error {
	before, err := snapshot(g.ctx, g.b)
	if err != nil {
		return err
	}
	ran, err := g.tx(tn)
	if ran {
		return fmt.Errorf("%s ran its function (%v); the guard must refuse it first", what, err)
	}
	if err := check(err); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return unchanged(g.ctx, g.b, before, what)
}

// matching is refusal's check of want.
func matching(want ...error) func(error) error {
	return func(err error) error { return refusal(err, want...) }
}

// refusal is an error unless err is a refusal matching every one of want.
func refusal(err error, want ...error) error {
	for _, w := range want {
		if !errors.Is(err, w) {
			return fmt.Errorf("%v; want a refusal matching %v", err, want)
		}
	}
	if !leases.IsRefusal(err) {
		return fmt.Errorf("%v; want a refusal (leases.IsRefusal)", err)
	}
	return nil
}

// superseded is an error unless err refuses an older tenure's
// transaction: ErrStale, or, from a guard that checks the lease, perhaps
// ErrNotLive instead (the older lease is no longer live once a newer one
// was granted).
func (g *tenures) superseded(err error) error {
	if g.b.GuardChecksLive && errors.Is(err, leases.ErrNotLive) {
		return refusal(err)
	}
	return refusal(err, leases.ErrStale)
}

// checkTenure: A's tenure commits; its function's failure commits
// nothing; once B's tenure has begun (A's lease released, B granted the
// next epoch) A's transactions, and A's tenure begun again, are refused
// and change nothing, while B's commit. Where the guard checks the lease,
// B's transactions are refused once B's lease was released, and a
// tenure's once its lease expired. Bad names are invalid input.
func checkTenure(ctx context.Context, b Backend) error {
	g := &tenures{ctx: ctx, b: b}
	a, err := g.grant("r", "A")
	if err != nil {
		return fmt.Errorf("grant A: %w", err)
	}
	ta, err := b.Guard.Tenure(ctx, a)
	if err != nil || ta.Epoch() != a.Epoch || ta.Lease() != a {
		return fmt.Errorf("A's tenure of %+v: %v", a, err)
	}
	if err := g.commits("A's transaction", ta); err != nil {
		return err
	}
	if err := failureCommitsNothing(g, ta); err != nil {
		return err
	}
	if err := g.release(a); err != nil {
		return fmt.Errorf("release A: %w", err)
	}
	bl, err := g.grant("r", "B")
	if err != nil || bl.Epoch <= a.Epoch {
		return fmt.Errorf("grant B after A: %+v, %v; want an epoch above %d", bl, err, a.Epoch)
	}
	tb, err := b.Guard.Tenure(ctx, bl)
	if err != nil {
		return fmt.Errorf("B's tenure: %w", err)
	}
	if err := g.refuses("A's transaction after B's tenure began", ta, g.superseded); err != nil {
		return err
	}
	if _, err := b.Guard.Tenure(ctx, a); g.superseded(err) != nil {
		return fmt.Errorf("A's tenure begun again after B's: %w", g.superseded(err))
	}
	if err := g.commits("B's transaction", tb); err != nil {
		return err
	}
	if b.GuardChecksLive {
		if err := g.release(bl); err != nil {
			return fmt.Errorf("release B: %w", err)
		}
		if err := g.refuses("B's transaction after its release", tb, matching(leases.ErrNotLive, leases.ErrNotHolder)); err != nil {
			return err
		}
		if err := expiredCommitsNothing(g); err != nil {
			return err
		}
	}
	return tenureBadInput(g, a)
}

// failureCommitsNothing: a transaction whose function fails commits
// nothing and returns that failure, which is not an unknown outcome.
func failureCommitsNothing(g *tenures, tn *fence.Tenure) error {
	before, err := snapshot(g.ctx, g.b)
	if err != nil {
		return err
	}
	failed := errors.New("the work failed")
	err = tn.Tx(g.ctx, nil, func(tx *sql.Tx) error {
		if g.b.Work != nil {
			if err := g.b.Work(g.ctx, tx, tn.Lease()); err != nil {
				return err
			}
		}
		return failed
	})
	if !errors.Is(err, failed) || errors.Is(err, leases.ErrOutcomeUnknown) || leases.IsRefusal(err) {
		return fmt.Errorf("a transaction whose function failed: %v; want the function's error", err)
	}
	return unchanged(g.ctx, g.b, before, "a transaction whose function failed")
}

// expiredCommitsNothing: a tenure begun while its lease is live commits
// nothing once the lease has expired (Backend.Expire). A lease short
// enough for Expire to be quick may expire before its tenure begins on a
// slow run (the guard then refuses the tenure, as it must): each such
// try doubles the time-to-live, on a resource of its own.
func expiredCommitsNothing(g *tenures) error {
	if g.b.Expire == nil {
		return nil
	}
	for ttl, try := 50*time.Millisecond, 1; ; ttl, try = 2*ttl, try+1 {
		l, err := g.b.Lessor.Acquire(g.ctx, fmt.Sprintf("expiring-%d", try), "E", ttl)
		if err != nil {
			return fmt.Errorf("grant E: %w", err)
		}
		tn, err := g.b.Guard.Tenure(g.ctx, l)
		if errors.Is(err, leases.ErrNotLive) && ttl < time.Minute {
			continue // expired already
		}
		if err != nil {
			return fmt.Errorf("E's tenure of a lease live for %v: %w", ttl, err)
		}
		if err := g.b.Expire(g.ctx, l); err != nil {
			return fmt.Errorf("Backend.Expire: %w", err)
		}
		return g.refuses("a transaction after its lease's expiry", tn, matching(leases.ErrNotLive, leases.ErrLeaseExpired))
	}
}

// tenureBadInput: a tenure of a lease whose resource or holder is one of
// BadNames, or whose epoch is below 1, is refused as invalid input and
// changes nothing.
func tenureBadInput(g *tenures, held leases.Lease) error {
	begin := func(l leases.Lease) func() error {
		return func() error { _, err := g.b.Guard.Tenure(g.ctx, l); return err }
	}
	bad := []badCall{{"tenure: epoch 0", begin(with(held, func(l *leases.Lease) { l.Epoch = 0 }))}}
	for _, name := range BadNames() {
		bad = append(bad,
			badCall{"tenure: resource: " + name.Why, begin(with(held, func(l *leases.Lease) { l.Resource = name.Name }))},
			badCall{"tenure: holder: " + name.Why, begin(with(held, func(l *leases.Lease) { l.Holder = name.Name }))})
	}
	return refuseEach(g.ctx, g.b, bad)
}
