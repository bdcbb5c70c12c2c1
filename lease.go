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
}

// Authority is the single trusted issuer of leases and epochs. Every
// method is one transaction of its backend: it either commits its whole
// change or changes nothing, except that a commit that fails may have
// taken effect ([ErrOutcomeUnknown]).
//
// Ticks are supplied by the caller. A lease granted at tick t for d ticks
// is live at ticks t .. t+d-1 and expired from tick t+d on. A tick earlier
// than the last change the authority made to a resource is refused with
// [ErrTickBackwards].
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

	// Holder returns the lease that is live on resource at tick now, and
	// false when there is none (never leased, expired or released). It
	// changes nothing.
	Holder(ctx context.Context, resource string, now int64) (Lease, bool, error)
}

// Watcher is implemented by authorities that can tell a waiting acquirer
// that a resource's lease changed, so that it need not wait for the
// expiry tick to learn of a release.
type Watcher interface {
	// Changed returns a channel that is closed at the first change to
	// resource's lease (a grant, a renewal, a release) committed after
	// the call, or when ctx ends. Which changes a backend can see is its
	// own to document.
	Changed(ctx context.Context, resource string) (<-chan struct{}, error)
}

// Lessor is an authority as a lease holder's session uses it: the caller
// says how long a lease should live, never what time it is. Whose clock
// decides expiry is the lessor's to document: the authority's own (its
// server's, or the host's for a file on one machine), or a caller's clock
// driving an [Authority]'s explicit ticks (package leases/clock). The
// ticks in the leases it returns are that clock's milliseconds.
//
// The outcomes and errors are an Authority's: one transaction per call, a
// refusal, a failure before commit, or an unknown outcome.
type Lessor interface {
	// Acquire grants holder a lease on resource for ttl, with the
	// resource's next epoch, or is refused with ErrLeaseHeld (a
	// *HeldError) while a lease is live.
	Acquire(ctx context.Context, resource, holder string, ttl time.Duration) (Lease, error)
	// Renew extends held, which must be the resource's current and live
	// lease, to ttl from now, never earlier than it expired before.
	Renew(ctx context.Context, held Lease, ttl time.Duration) (Lease, error)
	// Release ends held, which must be the resource's current and live
	// lease, now; its epoch is never granted again.
	Release(ctx context.Context, held Lease) error
	// Holder returns the lease live on resource now, and false when there
	// is none.
	Holder(ctx context.Context, resource string) (Lease, bool, error)
}

// Lister is implemented by lessors that can say which leases are live,
// for operators and their tools (cmd/leases lists them). It is optional:
// a session never needs it.
type Lister interface {
	// Live returns the leases live now, sorted by resource: those on the
	// named resources (a free one is left out), or every live lease when
	// none is named. Now is the tick of the lessor's clock at which it
	// found them live, the same clock as the leases' ticks, so that
	// ExpiresAt-now is how long each has left whatever the caller's own
	// clock says. It changes nothing; a bad name is ErrInvalidInput.
	Live(ctx context.Context, resources ...string) (live []Lease, now int64, err error)
}
