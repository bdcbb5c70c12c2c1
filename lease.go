package leases

import (
	"context"
	"time"
)

// Lease is one tenure of a resource: who holds it, with which epoch (the
// fencing token to send along with every write), and until which tick.
type Lease struct {
	Resource string `json:"resource"`
	Holder   string `json:"holder"`
	// Epoch is strictly greater than every epoch granted before for the
	// same resource.
	Epoch int64 `json:"epoch"`
	// GrantedAt is the tick of the acquire.
	GrantedAt int64 `json:"granted_at"`
	// ExpiresAt is the first tick at which the lease is no longer live and
	// another holder may acquire the resource.
	ExpiresAt int64 `json:"expires_at"`
	// Ticks says what GrantedAt and ExpiresAt count, and so whether
	// ExpiresAt is the instant the lease ends or a bound of it.
	Ticks Ticks `json:"ticks,omitempty"`
}

// Ticks says whose clock a lease's ticks are.
type Ticks string

const (
	// CallerTicks are ticks a caller gave an [Authority], or the clock a
	// caller drives a lessor with (package leases/clock): they count
	// whatever the caller counts (the wall clock's milliseconds, or a
	// manual clock's ticks). The lease ends exactly at ExpiresAt, on that
	// count.
	CallerTicks Ticks = ""
	// HostMillis are milliseconds since the Unix epoch on the clock of
	// the machine that holds a SQLite file: the lease ends exactly at
	// ExpiresAt on that clock.
	HostMillis Ticks = "host-ms"
	// ServerMillis are milliseconds since the Unix epoch on a PostgreSQL
	// server's clock: the lease ends exactly at ExpiresAt on that clock.
	ServerMillis Ticks = "server-ms"
	// LocalMillis are milliseconds since the Unix epoch on this process's
	// clock when the authority answered (etcd, whose leader counts its
	// leases' time-to-live in whole seconds on its own clock): ExpiresAt
	// is a bound, the lease ends no later (unless a change of leader
	// gives it its time-to-live afresh), and may end earlier.
	LocalMillis Ticks = "local-ms"
)

// TTL is how long the lease was granted or renewed for, from GrantedAt to
// ExpiresAt, with a tick taken for a millisecond.
func (l Lease) TTL() time.Duration { return ticks(l.ExpiresAt - l.GrantedAt) }

// Left is how long the lease has left at tick now of its own clock (the
// now a [Lessor]'s Live returns), with a tick taken for a millisecond; 0
// once it has expired.
func (l Lease) Left(now int64) time.Duration { return ticks(max(0, l.ExpiresAt-now)) }

// Expires is ExpiresAt as a time, and true, when the ticks are a clock's
// milliseconds since the Unix epoch (HostMillis, ServerMillis,
// LocalMillis); the zero time and false for CallerTicks, which need not
// be a time of day.
func (l Lease) Expires() (time.Time, bool) {
	if l.Ticks == CallerTicks {
		return time.Time{}, false
	}
	return time.UnixMilli(l.ExpiresAt), true
}

// Exact reports whether ExpiresAt is the instant the authority ends the
// lease (CallerTicks, HostMillis, ServerMillis), rather than a bound of
// it (LocalMillis).
func (l Lease) Exact() bool { return l.Ticks != LocalMillis }

func ticks(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

// Authority is the contract's model of a lease authority, with explicit
// ticks: the caller says what time it is. Every method is one
// transaction of its backend: it either commits its whole change or
// changes nothing, except that a commit that fails may have taken effect
// ([ErrOutcomeUnknown]). A service uses a [Lessor] instead.
//
// A lease granted at tick t for d ticks is live at ticks t .. t+d-1 and
// expired from tick t+d on. A tick earlier than the last change the
// authority made to a resource is refused with [ErrTickBackwards]. Its
// leases' ticks are CallerTicks.
type Authority interface {
	// Acquire grants holder a lease on resource from tick now for ttl
	// ticks, with the resource's next epoch: one more than the last epoch
	// ever granted for it, or 1. It is refused with ErrLeaseHeld while
	// another lease (or holder's own) is live, that is while now is below
	// its expiry tick; at exactly the expiry tick it is granted.
	Acquire(ctx context.Context, resource, holder string, now, ttl int64) (Lease, error)

	// Renew extends held, which must be the resource's current and still
	// live lease, so that it expires at now+ttl, or later if it already
	// did: a renewal never moves the expiry earlier. The epoch stays the
	// same: renewal continues the tenure, it does not start a new one.
	Renew(ctx context.Context, held Lease, now, ttl int64) (Lease, error)

	// Release ends held, which must be the resource's current and still
	// live lease, at tick now. The epoch is kept, so the next acquire gets
	// a higher one: epochs are never reused.
	Release(ctx context.Context, held Lease, now int64) error

	// Lease returns the lease that is live on resource at tick now, and
	// false when there is none (never leased, expired or released). It
	// changes nothing.
	Lease(ctx context.Context, resource string, now int64) (Lease, bool, error)

	// Live returns the leases live at tick now, sorted by resource: those
	// on the named resources (a free one is left out), or every live
	// lease when none is named. It changes nothing.
	Live(ctx context.Context, now int64, resources ...string) ([]Lease, error)

	// Changed returns a channel that is closed at the first change to
	// resource's lease (a grant, a renewal, a release) that the authority
	// sees after the call, or when ctx ends, so that a waiter need not
	// wait for the expiry to learn of a release. Which changes a backend
	// sees, and how soon, is its own to document.
	Changed(ctx context.Context, resource string) (<-chan struct{}, error)
}

// Lessor is an authority as a lease holder's session uses it: the caller
// says how long a lease should live, never what time it is. Every
// backend's Store.Lessor() is one, on the authority's own clock (the
// machine's for a SQLite file, the server's for PostgreSQL, etcd's own
// leases for etcd); package leases/clock makes one of an [Authority] and a
// caller's clock. The leases it returns say whose clock their ticks are
// (Lease.Ticks).
//
// The outcomes and errors are an Authority's: one transaction per call, a
// refusal, a failure before commit, or an unknown outcome.
//
// Every backend's Store.Lessor() grants a resource to its waiters in
// the order they were first refused: a refused Acquire puts its holder in
// the resource's line, and a free lease goes to the first in line that is
// still there, the others being refused (a *HeldError whose Queued is
// set) until it is granted. A waiter keeps its place until the lease that
// refused it could have run out, plus its own ttl: long enough to come
// back for it (session.Wait does, at once when Changed tells of a
// release), and no longer, so that a waiter that went away (a try-once
// session.Start, a process that died) holds the next grant back by that
// much at most. A holder that releases and acquires again goes to the
// back of the line. A lessor of package leases/clock has no line.
type Lessor interface {
	// Acquire grants holder a lease on resource for ttl, with the
	// resource's next epoch, or is refused with ErrLeaseHeld (a
	// *HeldError) while a lease is live or another waiter is ahead in
	// line.
	Acquire(ctx context.Context, resource, holder string, ttl time.Duration) (Lease, error)
	// Renew extends held, which must be the resource's current and live
	// lease, to ttl from now, never earlier than it expired before.
	Renew(ctx context.Context, held Lease, ttl time.Duration) (Lease, error)
	// Release ends held, which must be the resource's current and live
	// lease, now; its epoch is never granted again.
	Release(ctx context.Context, held Lease) error
	// Lease returns the lease live on resource now, and false when there
	// is none.
	Lease(ctx context.Context, resource string) (Lease, bool, error)
	// Live returns the leases live now, sorted by resource: those on the
	// named resources (a free one is left out), or every live lease when
	// none is named. Now is the tick of the lessor's clock at which it
	// found them live, the same clock as the leases' ticks, so that
	// Lease.Left(now) is how long each has left whatever the caller's own
	// clock says. It changes nothing; a bad name is ErrInvalidInput.
	Live(ctx context.Context, resources ...string) (live []Lease, now int64, err error)
	// Changed returns a channel that is closed at the first change to
	// resource's lease (a grant, a renewal, a release) that the lessor
	// sees after the call, or when ctx ends: session.Wait listens before
	// it tries, so that a release wakes it before the lease's expiry.
	Changed(ctx context.Context, resource string) (<-chan struct{}, error)
}
