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
// unless its options name another clock. Its leases' ticks are
// leases.CallerTicks: clk's.
func Lessor(auth leases.Authority, clk Clock) leases.Lessor {
	return &lessor{auth: auth, clk: clk}
}

// lessor is the lessor Lessor returns.
type lessor struct {
	auth leases.Authority
	clk  Clock
}

// Clock is the clock the lessor reads: a session on the lessor counts on
// it unless its options name another.
func (l *lessor) Clock() Clock { return l.clk }

func (l *lessor) Acquire(ctx context.Context, resource, holder string, ttl time.Duration) (leases.Lease, error) {
	ticks, err := rules.CheckDuration(ttl)
	if err != nil {
		return leases.Lease{}, err
	}
	return l.auth.Acquire(ctx, resource, holder, l.clk.Now(), ticks)
}

func (l *lessor) Renew(ctx context.Context, held leases.Lease, ttl time.Duration) (leases.Lease, error) {
	ticks, err := rules.CheckDuration(ttl)
	if err != nil {
		return leases.Lease{}, err
	}
	return l.auth.Renew(ctx, held, l.clk.Now(), ticks)
}

func (l *lessor) Release(ctx context.Context, held leases.Lease) error {
	return l.auth.Release(ctx, held, l.clk.Now())
}

func (l *lessor) Lease(ctx context.Context, resource string) (leases.Lease, bool, error) {
	return l.auth.Lease(ctx, resource, l.clk.Now())
}

func (l *lessor) Live(ctx context.Context, resources ...string) ([]leases.Lease, int64, error) {
	now := l.clk.Now()
	live, err := l.auth.Live(ctx, now, resources...)
	return live, now, err
}

func (l *lessor) Changed(ctx context.Context, resource string) (<-chan struct{}, error) {
	return l.auth.Changed(ctx, resource)
}
