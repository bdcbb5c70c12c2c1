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
	return start(ctx, lessor, resource, holder, set)
}

func start(ctx context.Context, lessor leases.Lessor, resource, holder string, set settings) (*Session, error) {
	for {
		sent := set.clock.Now()
		lease, err := lessor.Acquire(ctx, resource, holder, set.ttl)
		if err == nil {
			return begin(ctx, lessor, set, lease, sent), nil
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
		live, ok, herr := lessor.Holder(ctx, resource)
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
// have expired, or for a change such as a release where the lessor is a
// [leases.Watcher]), a tick that ran backwards because another caller's
// clock is ahead, a failure before commit, an unknown outcome (with a
// backoff with jitter for failures), and a grant whose answer came back
// after the session's deadline (the session would have ended before it
// began: it is released, and Wait waits again). It returns other errors
// only for invalid input and for a store that can answer nothing more
// until it is opened again. It is granted when the lessor grants, never
// earlier: the order of grants comes only from the lessor's
// transactions. The session it returns is live.
func Wait(ctx context.Context, lessor leases.Lessor, resource, holder string, opts Options) (*Session, error) {
	set, err := opts.settings(lessor)
	if err != nil {
		return nil, err
	}
	watcher, _ := lessor.(leases.Watcher)
	failures := 0
	for {
		// Listen before looking, so that a change between the look and
		// the wait is not missed.
		watch, stopWatching := context.WithCancel(ctx)
		var changed <-chan struct{}
		if watcher != nil {
			c, err := watcher.Changed(watch, resource)
			switch {
			case err == nil:
				changed = c
			case !retryable(err):
				stopWatching()
				return nil, fmt.Errorf("session: watch %q: %w", resource, err)
			}
		}
		s, err := start(ctx, lessor, resource, holder, set)
		if err == nil {
			if err = s.Check(); err == nil {
				stopWatching()
				return s, nil
			}
			// Granted, but the answer came back after the session's
			// deadline (a store that stalled for longer than the TTL less
			// the margin): a session that has ended is no lease to work
			// under. Release what may still be live, and try again at
			// once: the stall, not the store, was the trouble, and it took
			// longer than a backoff would.
			set.log.Warn("waiting for a lease: granted after the session's deadline, trying again",
				"resource", resource, "holder", holder, "epoch", s.Epoch(), "error", err.Error())
			_ = s.Close(ctx)
			stopWatching()
			continue
		}
		var (
			until  int64
			held   *leases.HeldError
			behind *leases.BackwardsError
		)
		switch {
		case ctx.Err() != nil:
			stopWatching()
			return nil, waitEnded(ctx, resource)
		case errors.As(err, &held):
			failures = 0
			until = set.clock.Now() + max(1, held.Live.ExpiresAt-held.At)
		case errors.As(err, &behind):
			until = set.clock.Now() + max(1, behind.Last-behind.Tick)
		case retryable(err):
			failures++
			until = set.clock.Now() + backoff(set, failures)
			set.log.Warn("waiting for a lease: acquire failed, trying again", "resource", resource, "holder", holder,
				"failures", failures, "error", err.Error())
		default:
			stopWatching()
			return nil, err
		}
		waitFor(watch, set.clock, until, changed)
		stopWatching()
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
	if errors.As(err, &held) {
		return &heldError{err: err, msg: fmt.Sprintf("session: %q is held by %q at epoch %d for another %v: %v",
			resource, held.Live.Holder, held.Live.Epoch, ticksDuration(held.Live.ExpiresAt-held.At), leases.ErrLeaseHeld)}
	}
	return fmt.Errorf("session: acquire %q: %w", resource, err)
}
