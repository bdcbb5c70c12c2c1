package session

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"

	"leases"
	"leases/clock"
)

// Start acquires resource for holder and, once granted, keeps renewing
// the lease until the session ends. While another lease is live it is
// refused with an error matching leases.ErrLeaseHeld (errors.As gives the
// *leases.HeldError), saying in plain durations how long the lease has to
// run; Wait waits instead. Options that make no sense are refused with
// leases.ErrInvalidInput, before anything is sent.
//
// An acquire whose outcome is unknown is an *OutcomeError: before it
// returns, Start releases the lease that may have been granted (under
// ctx, or within Options.CloseTimeout once ctx has ended), and the error
// says whether it may still be held, and until when. Any other error
// means that nothing was granted.
//
// Where the lessor is driven by callers' clocks and another caller, whose
// clock is ahead, changed the lease first, Start answers ErrLeaseHeld if
// the lease is live, and otherwise, if the clocks disagree by no more than
// the margin, waits for its own clock to catch up and tries again: a race
// between clocks is not the caller's error.
func Start(ctx context.Context, lessor leases.Lessor, resource, holder string, opts Options) (*Session, error) {
	set, err := opts.settings(lessor)
	if err != nil {
		return nil, err
	}
	s, err := start(ctx, lessor, resource, holder, set)
	var unknown *OutcomeError
	if errors.As(err, &unknown) {
		unknown.settle(ctx, lessor, set.closeTimeout)
	}
	return s, err
}

// start is one acquire (more, while clocks disagree); an unknown outcome
// is an *OutcomeError whose lease has not been released yet.
func start(ctx context.Context, lessor leases.Lessor, resource, holder string, set settings) (*Session, error) {
	for {
		sent := set.clock.Now()
		lease, err := lessor.Acquire(ctx, resource, holder, set.ttl)
		if err == nil {
			return begin(ctx, lessor, set, lease, sent), nil
		}
		if errors.Is(err, leases.ErrOutcomeUnknown) {
			return nil, &OutcomeError{Lease: lease, Err: acquireError(resource, err)}
		}
		var behind *leases.BackwardsError
		if !errors.As(err, &behind) || ctx.Err() != nil {
			return nil, acquireError(resource, err)
		}
		// Another caller, whose clock is ahead of this one, changed the
		// lease at a tick this clock has not reached. A live lease is
		// what it is: held. Otherwise (released, or run out) wait for
		// this clock to get there, if the clocks disagree by no more
		// than the margin allows for.
		live, ok, herr := lessor.Lease(ctx, resource)
		switch {
		case herr == nil && ok:
			return nil, acquireError(resource, &leases.HeldError{Live: live, At: behind.Tick})
		case herr != nil || behind.Last-behind.Tick > set.margin:
			return nil, acquireError(resource, err)
		}
		if err := set.clock.Wait(ctx, behind.Last); err != nil {
			return nil, waitEnded(ctx, resource)
		}
	}
}

// Wait acquires resource for holder as soon as it is free, or returns
// when ctx ends, with an error matching ctx's. It retries everything that
// is not the caller's fault: a live lease (it waits until the lease can
// have expired, or for a change such as a release, which the lessor's
// Changed tells of), a tick that ran backwards because another caller's
// clock is ahead, a failure before commit, an unknown outcome (with a
// backoff with jitter for failures), and a grant whose answer came back
// after the session's deadline (the session would have ended before it
// began: it is released, and Wait waits again). It returns other errors
// only for invalid input and for a store that can answer nothing more
// until it is opened again. It is granted when the lessor grants, never
// earlier: the order of grants comes only from the lessor's
// transactions. The session it returns is live.
//
// No lease is left behind in doubt: after an unknown outcome, and after
// a late grant, Wait releases the lease that may be held before it tries
// again (and tries the release again, after a backoff, while it fails).
// If it returns while such a lease was last in doubt (ctx ended, or the
// store must be opened again), the error is an *OutcomeError, released
// once more within Options.CloseTimeout if ctx has ended, which says
// whether the lease may still be held; a plain context error means that
// nothing was granted.
func Wait(ctx context.Context, lessor leases.Lessor, resource, holder string, opts Options) (*Session, error) {
	set, err := opts.settings(lessor)
	if err != nil {
		return nil, err
	}
	w := &waiter{lessor: lessor, resource: resource, holder: holder, set: set}
	for {
		if w.doubt != nil {
			if err := w.settle(ctx); err != nil {
				return nil, err
			}
			continue
		}
		if s, done, err := w.attempt(ctx); done {
			return s, err
		}
	}
}

// waiter is one Wait's state between its attempts.
type waiter struct {
	lessor           leases.Lessor
	resource, holder string
	set              settings
	failures         int // in a row
	// doubt is a lease that may be held and is not known to be released:
	// it is released before anything else is tried. lateGrant says that
	// it was granted after the session's deadline (the lessor's outcome
	// was known).
	doubt     *OutcomeError
	lateGrant bool
}

// settle releases the lease in doubt. It returns the error Wait returns
// once it cannot go on: ctx ended (the lease in doubt is the last
// attempt's outcome, released or not), or the release cannot succeed.
// Otherwise it backs off after a failed release, and after an unknown
// outcome (the store is in trouble), and nil means try again.
func (w *waiter) settle(ctx context.Context) error {
	d := w.doubt
	d.settle(ctx, w.lessor, w.set.closeTimeout)
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("session: waiting for %q: %w: %w", w.resource, ctxEnded(ctx), d)
	case d.Released && w.lateGrant:
		w.doubt = nil // try again at once
		return nil
	case !d.Released && (!retryable(d.ReleaseErr) || errors.Is(d.ReleaseErr, errNoLease)):
		return d
	case !d.Released:
		w.failures++
		w.set.log.Warn("waiting for a lease: the release of a lease that may be held failed, trying again",
			"resource", w.resource, "holder", w.holder, "epoch", d.Lease.Epoch,
			"failures", w.failures, "error", d.ReleaseErr.Error())
	}
	waitFor(ctx, w.set.clock, w.set.clock.Now()+backoff(w.set, max(1, w.failures)), nil)
	switch {
	case d.Released && ctx.Err() != nil:
		return fmt.Errorf("session: waiting for %q: %w: %w", w.resource, ctxEnded(ctx), d)
	case d.Released:
		w.doubt = nil
	}
	return nil // try again (once ctx has ended, within the bound)
}

// attempt is one acquire and what follows it: done when Wait returns
// its results, otherwise after the wait before the next attempt, or with
// a lease in doubt to settle.
func (w *waiter) attempt(ctx context.Context) (s *Session, done bool, err error) {
	// Listen before looking, so that a change between the look and the
	// wait is not missed.
	watch, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	changed, err := w.lessor.Changed(watch, w.resource)
	switch {
	case err == nil:
	case !retryable(err):
		return nil, true, fmt.Errorf("session: watch %q: %w", w.resource, err)
	default:
		changed = nil // the wait falls back on the lease's expiry
	}
	s, err = start(ctx, w.lessor, w.resource, w.holder, w.set)
	if err == nil {
		if err = s.Check(); err == nil {
			return s, true, nil
		}
		w.late(ctx, s, err)
		return nil, false, nil
	}
	var (
		until   int64
		held    *leases.HeldError
		behind  *leases.BackwardsError
		unknown *OutcomeError
	)
	switch {
	case errors.As(err, &unknown):
		w.failures++
		w.set.log.Warn("waiting for a lease: acquire's outcome unknown, releasing what it may have granted",
			"resource", w.resource, "holder", w.holder, "failures", w.failures, "error", err.Error())
		w.doubt, w.lateGrant = unknown, false // released first, whatever ctx did meanwhile
		return nil, false, nil
	case ctx.Err() != nil:
		return nil, true, waitEnded(ctx, w.resource)
	case errors.As(err, &held):
		w.failures = 0
		until = w.set.clock.Now() + max(1, held.Live.ExpiresAt-held.At)
	case errors.As(err, &behind):
		until = w.set.clock.Now() + max(1, behind.Last-behind.Tick)
	case retryable(err):
		w.failures++
		until = w.set.clock.Now() + backoff(w.set, w.failures)
		w.set.log.Warn("waiting for a lease: acquire failed, trying again", "resource", w.resource, "holder", w.holder,
			"failures", w.failures, "error", err.Error())
	default:
		return nil, true, err
	}
	waitFor(watch, w.set.clock, until, changed)
	return nil, false, nil
}

// late handles a grant whose answer came back after the session's
// deadline (a store that stalled for longer than the TTL less the
// margin): a session that has ended is no lease to work under. It is
// released, and Wait tries again at once: the stall, not the store, was
// the trouble, and it took longer than a backoff would. A release that
// fails leaves the lease in doubt, to be released before anything else.
func (w *waiter) late(ctx context.Context, s *Session, ended error) {
	w.set.log.Warn("waiting for a lease: granted after the session's deadline, trying again",
		"resource", w.resource, "holder", w.holder, "epoch", s.Epoch(), "error", ended.Error())
	if err := s.Close(ctx); err != nil {
		w.doubt, w.lateGrant = &OutcomeError{Lease: s.Lease(),
			Err: fmt.Errorf("session: %q granted after the session's deadline, and not released: %w", w.resource, err)}, true
	}
}

// retryable reports whether an error of an acquire is worth another try:
// anything but invalid input and a store that must be opened again.
func retryable(err error) bool {
	return !errors.Is(err, leases.ErrInvalidInput) && !storeUnusable(err)
}

// waitFor returns when the clock reaches tick, when changed is closed, or
// when ctx ends; the caller looks at ctx to tell which.
func waitFor(ctx context.Context, clk clock.Clock, tick int64, changed <-chan struct{}) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	reached := make(chan struct{})
	go func() {
		_ = clk.Wait(ctx, tick) // fails only when ctx ends
		close(reached)
	}()
	select {
	case <-reached:
	case <-changed:
	}
}

// backoff is how many ticks to wait after the failures-th failure in a
// row: doubling from the least backoff to the most, half of it fixed and
// half random, so that holders that failed together do not retry
// together.
func backoff(set settings, failures int) int64 {
	d := min(set.maxBackoff, set.minBackoff<<min(failures-1, 30))
	return max(1, d/2+rand.Int64N(d/2+1))
}

// waitEnded is the error of a wait cut off by ctx.
func waitEnded(ctx context.Context, resource string) error {
	return fmt.Errorf("session: waiting for %q: %w", resource, ctxEnded(ctx))
}

// ctxEnded is ctx's error, with its cause when that says more: it matches
// both.
func ctxEnded(ctx context.Context) error {
	if cause := context.Cause(ctx); !errors.Is(cause, ctx.Err()) {
		return fmt.Errorf("%w: %w", ctx.Err(), cause)
	}
	return ctx.Err()
}

// heldError is a refused acquire, said in plain durations; it unwraps to
// the lessor's error (a *leases.HeldError).
type heldError struct {
	msg string
	err error
}

func (e *heldError) Error() string { return e.msg }
func (e *heldError) Unwrap() error { return e.err }

func acquireError(resource string, err error) error {
	var held *leases.HeldError
	if errors.As(err, &held) && held.Queued {
		return &heldError{err: err, msg: fmt.Sprintf("session: %q is kept for %q, ahead in line, for another %v at most: %v",
			resource, held.Live.Holder, ticksDuration(held.Live.ExpiresAt-held.At), leases.ErrLeaseHeld)}
	}
	if errors.As(err, &held) {
		return &heldError{err: err, msg: fmt.Sprintf("session: %q is held by %q at epoch %d for another %v: %v",
			resource, held.Live.Holder, held.Live.Epoch, ticksDuration(held.Live.ExpiresAt-held.At), leases.ErrLeaseHeld)}
	}
	return fmt.Errorf("session: acquire %q: %w", resource, err)
}
