package leases

import (
	"errors"
	"fmt"
)

// Limits on what an authority or a receiver stores, so that hostile input
// is refused with ErrInvalidInput instead of bloating or confusing a store.
const (
	// MaxNameBytes bounds resource and holder names. A name is valid
	// UTF-8 of 1 to MaxNameBytes bytes, not only white space, with no
	// control character (tab, newline, NUL, DEL, C1) and no line or
	// paragraph separator; every backend refuses others, at every entry
	// point, with ErrInvalidInput.
	MaxNameBytes = 256
	// MaxValueBytes bounds a receiver value.
	MaxValueBytes = 64 << 10
)

// Sentinel errors. Check them with errors.Is; the wrapped message adds the
// details (which resource, which holder, which tick).
//
// Every error an operation returns is one of three kinds, and they call
// for different things:
//
//   - A refusal ([IsRefusal]): the input was refused (ErrInvalidInput) or
//     the operation was decided against on what the store holds
//     (ErrLeaseHeld, ErrNotHolder, ErrLeaseExpired, ErrTickBackwards,
//     ErrStale, ErrNotLive).
//     Nothing changed.
//   - A failure before commit: any other error except ErrOutcomeUnknown.
//     The store could not read or write, can answer no more
//     (ErrStoreUnusable), the context (or a bound of the store's own,
//     such as the etcd store's CallTimeout)
//     ended before the commit was sent (the error then also matches the
//     context's error, context.Canceled or context.DeadlineExceeded), or
//     the server refused the request on arrival (an etcd member without a
//     leader). Nothing changed, and the operation may be retried.
//   - An unknown outcome: ErrOutcomeUnknown. The commit was sent and
//     failed, or its context or bound ended while it was under way; the
//     change may or may not have taken effect.
var (
	// ErrInvalidInput reports an argument the operation cannot accept: an
	// empty or malformed name, a time-to-live below 1, a negative tick, an
	// epoch below 1. Nothing is changed.
	ErrInvalidInput = errors.New("invalid input")

	// ErrTickBackwards reports a tick earlier than the last tick at which
	// the authority changed the resource's lease: another caller, whose
	// clock is ahead, changed it first. It is a refusal decided on what
	// the store holds, not invalid input: with callers' clocks a race can
	// produce it. [BackwardsError] gives the ticks. Nothing is changed.
	ErrTickBackwards = errors.New("tick runs backwards")

	// ErrLeaseHeld reports an acquire refused because another lease on the
	// resource is still live; the message names the holder and the tick at
	// which its lease expires, and [HeldError] gives the live lease. The
	// live lease's own holder is refused too: renewal, not a second
	// acquire, extends a lease.
	ErrLeaseHeld = errors.New("lease held")

	// ErrLeaseExpired reports a renew or release of a lease whose expiry
	// tick has been reached. Once expired, a lease can only be acquired
	// again, with a new epoch.
	ErrLeaseExpired = errors.New("lease expired")

	// ErrNotHolder reports a renew or release by someone who does not hold
	// the resource's current lease (another holder, or an older epoch).
	ErrNotHolder = errors.New("not the lease holder")

	// ErrStale reports a call refused because a newer epoch has reached
	// the fence than the caller's: a newer lease holder has begun, and
	// this one must not act. It is the error of the outcome [Stale]; the
	// message says which epoch superseded the caller's. It is a refusal:
	// nothing was committed.
	ErrStale = errors.New("stale")

	// ErrNotLive reports that a tenure's transaction was refused because
	// the lease was not the live one on the store's clock when the
	// transaction was admitted or when it committed: it expired, was
	// released, or a newer epoch was granted. Only stores that keep the
	// leases in the same database as the transaction can tell
	// (sqlite.Store.Tenure, postgres.Store.Tenure). It is a refusal: the
	// error also matches ErrLeaseExpired (it expired) or ErrNotHolder
	// (released or superseded). Nothing of the transaction committed.
	ErrNotLive = errors.New("lease not live")

	// ErrOutcomeUnknown reports an operation whose commit was sent and
	// failed, or whose context ended while the commit was under way: the
	// change may have taken effect, or not, and nothing the caller can do
	// at once will tell. A SQLite commit whose fsync fails, for example,
	// has already written its change to the write-ahead log; whether it
	// counts depends on what the next process to open the file finds.
	//
	// What the caller must do:
	//   - After Acquire: assume the lease may be live, under the holder's
	//     name, until the expiry tick of the lease it would have granted
	//     (returned along with the error), and that its epoch may be
	//     consumed. Do not act on it; a retry by the same holder is refused
	//     with ErrLeaseHeld if it did take effect.
	//   - After Renew or Release: assume either; the lease expires at the
	//     later of the two expiry ticks at the latest.
	//   - After a receiver's Write or Fence: read the record before
	//     retrying; a retry of the same write at the same epoch is a replay
	//     if it did take effect.
	ErrOutcomeUnknown = errors.New("outcome unknown")

	// ErrStoreUnusable reports an operation refused because the store
	// can answer nothing more through this handle: close it, and open it
	// again. It is neither a refusal nor an unknown outcome: nothing
	// changed, and nothing will through this handle. Backends say why
	// with errors of their own that match it (package leases/sqlite:
	// ErrReopenRequired after an unknown outcome, ErrDatabaseMoved when
	// its file was replaced). A session ends at once on it.
	ErrStoreUnusable = errors.New("store unusable")
)

// IsRefusal reports whether err is a refusal: invalid input, or an
// operation decided against on what the store holds (ErrLeaseHeld,
// ErrNotHolder, ErrLeaseExpired, ErrTickBackwards). A refusal changed
// nothing, and retrying the same call unchanged gets the same answer until
// the store changes. Any other error is a failure (before commit, or with
// an unknown outcome: ErrOutcomeUnknown).
func IsRefusal(err error) bool {
	for _, refusal := range []error{ErrInvalidInput, ErrLeaseHeld, ErrNotHolder, ErrLeaseExpired, ErrTickBackwards, ErrNotLive, ErrStale} {
		if errors.Is(err, refusal) {
			return true
		}
	}
	return false
}

// HeldError is the refusal of an acquire while another lease is live
// (errors.Is(err, ErrLeaseHeld)), or, from a Lessor, while another waiter
// is ahead in the resource's line; errors.As gives it, with the live
// lease or the place ahead.
type HeldError struct {
	// Live is the lease that is live. When Queued, no lease is live and
	// Live is the place of the waiter ahead in line: its Holder, and the
	// tick until which the line keeps its place (ExpiresAt); its Epoch is
	// 0.
	Live Lease
	// At is the tick the acquire was decided at: the lease, or the place
	// ahead, lasts another Live.ExpiresAt-At ticks at most.
	At int64
	// Queued reports a free lease kept for the waiter ahead in line: a
	// Lessor grants a resource to its waiters in the order they were
	// first refused (see Lessor).
	Queued bool
}

// Error names the holder and the tick at which its lease expires, or the
// waiter ahead and the tick until which its place is kept.
func (e *HeldError) Error() string {
	if e.Queued {
		return fmt.Sprintf("%v: resource %q is free, kept for %q, ahead in line, until tick %d at most",
			ErrLeaseHeld, e.Live.Resource, e.Live.Holder, e.Live.ExpiresAt)
	}
	return fmt.Sprintf("%v: resource %q is held by %q until tick %d", ErrLeaseHeld, e.Live.Resource, e.Live.Holder, e.Live.ExpiresAt)
}

// Unwrap makes a HeldError match ErrLeaseHeld.
func (e *HeldError) Unwrap() error { return ErrLeaseHeld }

// BackwardsError is the refusal of a call whose tick is earlier than the
// last change to the resource's lease (errors.Is(err, ErrTickBackwards)).
type BackwardsError struct {
	Resource string
	// Tick is the call's tick, Last the tick of the last change.
	Tick, Last int64
}

// Error names both ticks.
func (e *BackwardsError) Error() string {
	return fmt.Sprintf("%v: tick %d is before tick %d, the last change to %q", ErrTickBackwards, e.Tick, e.Last, e.Resource)
}

// Unwrap makes a BackwardsError match ErrTickBackwards.
func (e *BackwardsError) Unwrap() error { return ErrTickBackwards }
