package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"

	"leases"
)

// ErrWorkRunning reports that Do or Lead returned while the work under
// the lease was still running: Options.Grace passed after the work's
// context ended, and the work did not return. The lease was not
// released, since the work may still act: it runs out by itself, and the
// next holder is granted only then.
var ErrWorkRunning = errors.New("session: the work under the lease did not return within the grace")

// Do waits for the lease on resource (as Wait does), runs fn under it,
// and releases it, like pglock's Do. fn's context ends when the session
// ends (its deadline passed, or the lease was lost) or when ctx ends:
// fn must stop then. The lease is released only once fn has returned,
// never while it may still act, and at once then, also when ctx has
// ended (a shutdown hands the lease over, it does not let it run out;
// the release is then bounded by Options.CloseTimeout). While fn winds
// down after ctx ended, the session goes on renewing the lease. With
// Options.Grace set, Do waits for fn that long at most after fn's
// context ended; if fn has not returned by then, Do ends the session
// without releasing the lease and returns an error matching
// ErrWorkRunning, and fn goes on in its goroutine. A panic in fn is
// raised again by Do, and a runtime.Goexit in fn (a test's t.Fatal) ends
// Do's caller's goroutine too, after the release.
//
// Do returns fn's error, joined with the session's when the session
// ended before fn returned (fn may then have acted without the lease: the
// error matches ErrEnded), and with Close's when the release failed. When
// Wait fails, fn never runs and Do returns Wait's error: an
// *OutcomeError when a lease may have been granted.
func Do(ctx context.Context, lessor leases.Lessor, resource, holder string, opts Options, fn func(ctx context.Context, s *Session) error) error {
	s, err := Wait(ctx, lessor, resource, holder, opts)
	if err != nil {
		return err
	}
	work, cancel := context.WithCancelCause(s.Context())
	defer cancel(nil)
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	defer stop()
	returned := make(chan result, 1)
	go func() {
		r := result{goexit: true} // unless fn returns or panics
		defer func() { returned <- r }()
		r = call(fn, work, s)
	}()
	r, ok := s.await(work, returned)
	ended := s.Err() // nil while the session lived when fn returned
	if !ok {
		return errors.Join(ended, s.abandon(ctx))
	}
	closeErr := s.Close(ctx)
	switch {
	case r.panicked:
		panic(r.panic)
	case r.goexit:
		runtime.Goexit() // fn called it (t.Fatal in a test): so does its caller
	}
	return errors.Join(r.err, ended, closeErr)
}

// result is how fn returned: its error, the value it panicked with, or
// runtime.Goexit.
type result struct {
	err      error
	panicked bool
	panic    any
	goexit   bool
}

// call calls fn, recovering a panic so that Do can release the lease
// before it raises it again.
func call(fn func(context.Context, *Session) error, ctx context.Context, s *Session) (r result) {
	defer func() {
		if v := recover(); v != nil {
			r = result{panicked: true, panic: v}
		}
	}()
	return result{err: fn(ctx, s)}
}

// await waits for the work to return: however long it takes, or, with a
// grace set, at most that long after work ended. ok is false when the
// grace passed first.
func (s *Session) await(work context.Context, returned <-chan result) (r result, ok bool) {
	select {
	case r = <-returned:
		return r, true
	case <-work.Done():
	}
	if s.set.grace == 0 {
		return <-returned, true
	}
	timer, stop := context.WithCancel(context.Background())
	defer stop()
	over := make(chan struct{})
	go func() {
		_ = s.set.clock.Wait(timer, s.set.clock.Now()+s.set.grace) // fails only once stopped
		close(over)
	}()
	select {
	case r = <-returned:
		return r, true
	case <-over:
	}
	select { // both at once: the work did return
	case r = <-returned:
		return r, true
	default:
		return result{}, false
	}
}

// abandon ends the session without releasing its lease: the work under
// it did not return within the grace and may still act. Close answers
// the same from then on.
func (s *Session) abandon(ctx context.Context) error {
	s.closed.Do(func() {
		_ = s.Check()
		s.end(closedBy(ctx))
		s.goroutines.Wait() // no renewal follows
		lease := s.Lease()
		s.closeErr = fmt.Errorf("%w (%v after its context ended); the lease on %q at epoch %d was not released: it runs out by itself; %w",
			ErrWorkRunning, ticksDuration(s.set.grace), lease.Resource, lease.Epoch, s.Err())
		s.set.log.LogAttrs(s.values, slog.LevelWarn, "lease left to run out: the work under it is still running",
			slog.String("resource", lease.Resource), slog.String("holder", lease.Holder), slog.Int64("epoch", lease.Epoch),
			slog.Duration("grace", ticksDuration(s.set.grace)))
	})
	return s.Close(ctx)
}

// Leader is what Lead calls as this holder gains and loses the lease.
type Leader struct {
	// OnStarted runs when the holder has become the leader, with a
	// context that ends when it stops being one (the session ended) or
	// Lead's context ends. The holder stays the leader after OnStarted
	// returns, until then. It is the work under the lease: the lease is
	// released only once OnStarted has returned and its context has
	// ended (within Options.Grace, if set), so run the leader's work in
	// it, or wait in it for the goroutines it starts: work left running
	// in a goroutine of its own may still act after the release.
	// Required.
	OnStarted func(ctx context.Context, s *Session)
	// OnStopped, when set, runs after each tenure, with why it ended (an
	// error matching ErrEnded, or Lead's context's error).
	OnStopped func(err error)
}

// Lead keeps holder leading on resource until ctx ends, like client-go's
// leader election: it waits for the lease, calls OnStarted, holds the
// lease until it is lost or ctx ends, calls OnStopped, and, unless ctx
// has ended, waits for the lease again. It returns ctx's error, or an
// error Wait cannot retry (invalid input, a store that must be opened
// again). Nothing that may still be held is left unsaid: when the last
// wait ended with a lease in doubt, the error is Wait's *OutcomeError;
// when the last tenure's release failed, the error says so, joined with
// ctx's. When ctx ends, the lease is released as soon as OnStarted has
// returned, so that the next leader need not wait for it to expire. If
// OnStarted does not return within Options.Grace after its context
// ended, Lead returns at once, with an error matching ErrWorkRunning,
// without releasing the lease and without leading again.
func Lead(ctx context.Context, lessor leases.Lessor, resource, holder string, opts Options, leader Leader) error {
	if leader.OnStarted == nil {
		return errors.Join(leases.ErrInvalidInput, errors.New("session: Lead needs Leader.OnStarted"))
	}
	for {
		var held *Session
		err := Do(ctx, lessor, resource, holder, opts, func(ctx context.Context, s *Session) error {
			held = s
			leader.OnStarted(ctx, s)
			<-ctx.Done()
			return nil
		})
		if held != nil && leader.OnStopped != nil {
			why := err
			if why == nil {
				why = ctx.Err()
			}
			leader.OnStopped(why)
		}
		var unknown *OutcomeError
		switch {
		case held == nil && errors.As(err, &unknown):
			return fmt.Errorf("session: leading %q: %w", resource, err)
		case errors.Is(err, ErrWorkRunning):
			return fmt.Errorf("session: leading %q: %w", resource, err)
		case ctx.Err() != nil && held != nil && held.Close(ctx) != nil:
			// Close answers again what it answered Do.
			return fmt.Errorf("session: leading %q: %w; %w", resource, ctxEnded(ctx), held.Close(ctx))
		case ctx.Err() != nil:
			return fmt.Errorf("session: leading %q: %w", resource, ctxEnded(ctx))
		case held == nil:
			return err // Wait gave up: nothing it can retry
		}
	}
}
