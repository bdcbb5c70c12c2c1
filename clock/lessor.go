package clock

import (
	"context"
	"time"

	"leases"
	"leases/internal/rules"
)

// Lessor is auth driven by clk: every call reads clk for the tick that
// auth's explicit-tick methods take, and a time-to-live in milliseconds of
// it. The caller's clock then decides when a lease expires: holders and
// waiters in different processes stay apart only while their clocks agree
// within a session's margin. A session started on it counts on clk too,
// unless its options name another clock.
//
// Where auth is a [leases.Watcher], so is the lessor; otherwise its
// Changed returns a channel that only ctx's end closes.
func Lessor(auth leases.Authority, clk Clock) *CallerClock {
	return &CallerClock{auth: auth, clk: clk}
}

// CallerClock is the lessor [Lessor] returns.
type CallerClock struct {
	auth leases.Authority
	clk  Clock
}

var (
	_ leases.Lessor  = (*CallerClock)(nil)
	_ leases.Watcher = (*CallerClock)(nil)
)

// Clock is the clock the lessor reads.
func (l *CallerClock) Clock() Clock { return l.clk }

// Authority is the authority the lessor drives.
func (l *CallerClock) Authority() leases.Authority { return l.auth }

// Acquire is the authority's Acquire at the clock's tick.
func (l *CallerClock) Acquire(ctx context.Context, resource, holder string, ttl time.Duration) (leases.Lease, error) {
	ticks, err := rules.CheckDuration(ttl)
	if err != nil {
		return leases.Lease{}, err
	}
	return l.auth.Acquire(ctx, resource, holder, l.clk.Now(), ticks)
}

// Renew is the authority's Renew at the clock's tick.
func (l *CallerClock) Renew(ctx context.Context, held leases.Lease, ttl time.Duration) (leases.Lease, error) {
	ticks, err := rules.CheckDuration(ttl)
	if err != nil {
		return leases.Lease{}, err
	}
	return l.auth.Renew(ctx, held, l.clk.Now(), ticks)
}

// Release is the authority's Release at the clock's tick.
func (l *CallerClock) Release(ctx context.Context, held leases.Lease) error {
	return l.auth.Release(ctx, held, l.clk.Now())
}

// Holder is the authority's Holder at the clock's tick.
func (l *CallerClock) Holder(ctx context.Context, resource string) (leases.Lease, bool, error) {
	return l.auth.Holder(ctx, resource, l.clk.Now())
}

// Changed is the authority's Changed where it has one.
func (l *CallerClock) Changed(ctx context.Context, resource string) (<-chan struct{}, error) {
	if w, ok := l.auth.(leases.Watcher); ok {
		return w.Changed(ctx, resource)
	}
	return ctx.Done(), nil
}
