package session

import (
	"context"
	"errors"
	"fmt"

	"leases"
)

// Do waits for the lease on resource (as Wait does), runs fn under it,
// and releases it, like pglock's Do. fn's context ends when the session
// ends (its deadline passed, or the lease was lost) or when ctx ends:
// fn must stop then. Do returns fn's error, joined with the session's
// when the session ended before fn returned (fn may then have acted
// without the lease: the error matches ErrEnded), and with Close's when
// the release failed. When Wait fails, fn never runs and Do returns
// Wait's error: an *OutcomeError when a lease may have been granted.
func Do(ctx context.Context, lessor leases.Lessor, resource, holder string, opts Options, fn func(ctx context.Context, s *Session) error) error {
	s, err := Wait(ctx, lessor, resource, holder, opts)
	if err != nil {
		return err
	}
	work, cancel := context.WithCancelCause(s.Context())
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	err = fn(work, s)
	stop()
	cancel(nil)
	ended := s.Err() // nil while the session lived when fn returned
	return errors.Join(err, ended, s.Close(ctx))
}

// Leader is what Lead calls as this holder gains and loses the lease.
type Leader struct {
	// OnStarted runs when the holder has become the leader, with a
	// context that ends when it stops being one (the session ended) or
	// Lead's context ends. The holder stays the leader after OnStarted
	// returns, until then. Required.
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
// ctx's.
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
