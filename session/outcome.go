package session

import (
	"context"
	"errors"
	"fmt"
	"time"

	"leases"
)

// OutcomeError is the error of Start, Wait, Do and Lead when a lease may
// have been granted to the holder and was not handed over as a session:
// the last acquire's outcome was unknown (leases.ErrOutcomeUnknown), or,
// in Wait, a grant that came back after the session's deadline could not
// be released. errors.As gives it; it always matches
// leases.ErrOutcomeUnknown, and also what Err and ReleaseErr match (the
// context's end, leases.ErrStoreUnusable).
//
// Before returning it, the call released the lease it may hold, under its
// context while that lived and otherwise within Options.CloseTimeout. What
// the caller may assume:
//
//   - Released: nothing is held any more. The release took effect, or it
//     was refused because the lease was not live (it never took effect,
//     or it had expired), decided after the acquire could take effect:
//     an acquire still on its way can no longer take effect (on etcd its
//     transaction fails; on PostgreSQL the release waits for its row
//     lock, or, on a resource's first acquire, for its first row to be
//     committed or not). The epoch may have been consumed.
//   - Not Released: the lease may be live, under the holder's name, until
//     Lease.ExpiresAt (a tick of the lessor's clock): do not act on it,
//     and expect another holder to wait until then. ReleaseErr says why
//     the release failed.
//
// A plain context error (one that matches no OutcomeError) still means
// that nothing was granted.
type OutcomeError struct {
	// Lease is the lease that may have been granted: the one the lessor
	// returned along with its unknown outcome, or the late grant whose
	// release failed. Its Epoch is 0 when the lessor did not say which
	// lease it would have granted.
	Lease leases.Lease
	// Released reports that the lease is not held: it was released, or
	// its release was refused because it was not live.
	Released bool
	// Err is what left the lease in doubt: the acquire's error (matching
	// leases.ErrOutcomeUnknown), or the late grant's failed release.
	Err error
	// ReleaseErr is why the lease was not released; nil when Released.
	ReleaseErr error
}

// Error says whether the lease may be held, and until when.
func (e *OutcomeError) Error() string {
	if e.Released {
		return fmt.Sprintf("session: %v: %q was not left held by %q (epoch %d, which may have been granted, was released): %v",
			leases.ErrOutcomeUnknown, e.Lease.Resource, e.Lease.Holder, e.Lease.Epoch, e.Err)
	}
	if e.Lease.Epoch == 0 {
		return fmt.Sprintf("session: %v: a lease may be held, and the lessor did not say which (%v): %v",
			leases.ErrOutcomeUnknown, e.ReleaseErr, e.Err)
	}
	return fmt.Sprintf("session: %v: assume %q held by %q at epoch %d until tick %d; its release failed (%v): %v",
		leases.ErrOutcomeUnknown, e.Lease.Resource, e.Lease.Holder, e.Lease.Epoch, e.Lease.ExpiresAt, e.ReleaseErr, e.Err)
}

// Is makes an OutcomeError match leases.ErrOutcomeUnknown, whatever left
// the lease in doubt.
func (e *OutcomeError) Is(target error) bool { return target == leases.ErrOutcomeUnknown }

// Unwrap gives Err and ReleaseErr, so that the error matches the
// context's end and a store that must be opened again.
func (e *OutcomeError) Unwrap() []error {
	if e.ReleaseErr == nil {
		return []error{e.Err}
	}
	return []error{e.Err, e.ReleaseErr}
}

// errNoLease is the release's error when the lessor said nothing of the
// lease it may have granted: there is nothing to release.
var errNoLease = errors.New("no lease to release")

// settle releases the lease that may be held, and says so in e: under
// ctx while it lives, and within closeTimeout once it has ended.
func (e *OutcomeError) settle(ctx context.Context, lessor leases.Lessor, closeTimeout time.Duration) {
	if e.Lease.Epoch == 0 {
		e.Released, e.ReleaseErr = false, errNoLease
		return
	}
	_, err := release(ctx, lessor, closeTimeout, e.Lease)
	e.Released = notHeld(err)
	e.ReleaseErr = nil
	if !e.Released {
		e.ReleaseErr = err
	}
}

// notHeld reports whether a release that answered err leaves the lease
// not held: it was released, or refused because it was not the live
// lease (it expired, or it never took effect and another is current).
func notHeld(err error) bool {
	return err == nil || errors.Is(err, leases.ErrLeaseExpired) || errors.Is(err, leases.ErrNotHolder)
}

// release releases lease under ctx while it lives, and within a bound
// of closeTimeout once it has ended, before the call or during it (a
// release cut off by the context's end is made again within the bound).
// bounded says that the bound was used.
func release(ctx context.Context, lessor leases.Lessor, closeTimeout time.Duration, lease leases.Lease) (bounded bool, err error) {
	if ctx.Err() == nil {
		err = lessor.Release(ctx, lease)
		if ctx.Err() == nil || notHeld(err) {
			return false, err
		}
	}
	within, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
	defer cancel()
	return true, lessor.Release(within, lease)
}
