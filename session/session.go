// Package session keeps one lease for a holder: it acquires the lease (at
// once, or waiting until it is free), renews it in the background on a
// clock, and tells the holder when it can no longer be sure it holds it.
//
// A lease alone does not stop a holder that was paused past its expiry; a
// fenced receiver does (see package leases). A session narrows the window
// from the holder's side: it stops believing in the lease before the tick
// at which the authority could grant it to someone else, by a margin the
// caller chooses, on the holder's own clock. Use both: the session so that
// a holder rarely acts late, the fence so that a late action does no harm.
package session

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"leases"
	"leases/clock"
	"leases/internal/rules"
)

// Options tune a session.
type Options struct {
	// TTL is the lease's time-to-live in ticks, at the grant and at
	// every renewal.
	TTL int64
	// Margin is how many ticks before the lease's expiry tick the session
	// ends: the holder's allowance for the skew between its clock and the
	// clock of whoever acquires next, and for the time an action takes
	// to take effect after the holder last checked. 0 <= Margin < TTL.
	Margin int64
	// RenewAfter is how many ticks after a grant or a renewal the session
	// renews. Zero means (TTL-Margin)/2, so that a failed renewal leaves
	// time for another try before the session ends.
	RenewAfter int64
}

func (o Options) check() error {
	if o.TTL < 1 || o.Margin < 0 || o.Margin >= o.TTL || o.RenewAfter < 0 {
		return fmt.Errorf("%w: session options %+v: want TTL >= 1, 0 <= Margin < TTL, RenewAfter >= 0",
			leases.ErrInvalidInput, o)
	}
	return nil
}

func (o Options) renewAfter() int64 {
	if o.RenewAfter > 0 {
		return o.RenewAfter
	}
	return max(1, (o.TTL-o.Margin)/2)
}

// ErrEnded reports that a session has ended: its lease may have expired,
// was lost, or was released. The wrapped error says which.
var ErrEnded = errors.New("session ended")

// Session holds one lease. Its epoch never changes: a renewal continues
// the tenure. Its methods are safe for concurrent use.
type Session struct {
	auth  leases.Authority
	clock clock.Clock
	opts  Options

	mu    sync.Mutex
	lease leases.Lease // the latest grant or renewal the authority confirmed
	err   error        // why the session ended; nil while it lives
	done  chan struct{}

	stop    context.CancelFunc // ends the renewal goroutine
	stopped chan struct{}      // closed when it has returned
}

// Start acquires resource for holder at the clock's current tick and,
// once granted, keeps renewing the lease until the session ends. A
// refusal (errors.Is(err, leases.ErrLeaseHeld)) means someone else holds
// it; Wait waits instead.
func Start(ctx context.Context, auth leases.Authority, clk clock.Clock, resource, holder string, opts Options) (*Session, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	lease, err := auth.Acquire(ctx, resource, holder, clk.Now(), opts.TTL)
	if err != nil {
		return nil, fmt.Errorf("session: %w", err)
	}
	return begin(auth, clk, opts, lease), nil
}

// Wait acquires resource for holder as soon as it is free, or returns
// ctx's error. It waits on the clock until the live lease's expiry tick,
// and, where the authority is a [leases.Watcher], also for a change such
// as a release, and tries again. It is granted at the expiry tick at the
// earliest, never before.
func Wait(ctx context.Context, auth leases.Authority, clk clock.Clock, resource, holder string, opts Options) (*Session, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	watcher, _ := auth.(leases.Watcher)
	for {
		// Listen before looking, so that a change between the look and
		// the wait is not missed.
		var changed <-chan struct{}
		watch, cancelWatch := context.WithCancel(ctx)
		if watcher != nil {
			var err error
			if changed, err = watcher.Changed(watch, resource); err != nil {
				cancelWatch()
				return nil, fmt.Errorf("session: %w", err)
			}
		}
		s, err := Start(ctx, auth, clk, resource, holder, opts)
		if !errors.Is(err, leases.ErrLeaseHeld) {
			cancelWatch()
			return s, err
		}
		held, live, err := auth.Holder(ctx, resource, clk.Now())
		if err != nil {
			cancelWatch()
			return nil, fmt.Errorf("session: %w", err)
		}
		if live {
			waitFor(watch, clk, held.ExpiresAt, changed)
		}
		cancelWatch()
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("session: waiting for %q: %w", resource, context.Cause(ctx))
		}
	}
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

func begin(auth leases.Authority, clk clock.Clock, opts Options, lease leases.Lease) *Session {
	ctx, stop := context.WithCancel(context.Background())
	s := &Session{
		auth: auth, clock: clk, opts: opts, lease: lease,
		done: make(chan struct{}), stop: stop, stopped: make(chan struct{}),
	}
	go s.renew(ctx)
	return s
}

// Lease is the latest lease the authority confirmed: the grant, or the
// last renewal.
func (s *Session) Lease() leases.Lease {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lease
}

// Epoch is the lease's epoch, the fencing token to send with every write.
func (s *Session) Epoch() int64 { return s.Lease().Epoch }

// Deadline is the tick at which the session ends unless a renewal comes
// first: the confirmed lease's expiry tick minus the margin.
func (s *Session) Deadline() int64 { return s.Lease().ExpiresAt - s.opts.Margin }

// Done is closed when the session ends: at the latest when its clock
// reaches Deadline, or as soon as a renewal is refused or the store can
// renew no more (ErrReopenRequired, ErrDatabaseMoved), or on Close. A
// holder that waits for work selects on it. The goroutine that closes it
// runs when it is scheduled, which after a pause of the whole process may
// be later than the holder's own next step: before an action, call Check.
func (s *Session) Done() <-chan struct{} { return s.done }

// Check reports whether the session still holds its lease now, reading
// the clock itself rather than trusting the renewal goroutine to have run:
// nil while the clock is below Deadline, and otherwise an error matching
// ErrEnded (and the session ends). Call it right before an action the
// lease guards, and send Epoch with the action to a fenced receiver.
func (s *Session) Check() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil && s.clock.Now() >= s.lease.ExpiresAt-s.opts.Margin {
		s.endLocked(s.expired())
	}
	return s.err
}

// Err is nil while the session lives, and afterwards says why it ended
// (an error matching ErrEnded).
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Close ends the session and releases its lease at the clock's current
// tick, so that the next holder need not wait for the expiry. A lease that
// has expired or was lost needs no release; any other failure to release
// is returned (the lease then runs out at its expiry tick). The session is
// over either way.
func (s *Session) Close(ctx context.Context) error {
	s.stop()
	<-s.stopped
	s.end(fmt.Errorf("%w: closed", ErrEnded))
	if err := s.auth.Release(ctx, s.Lease(), s.clock.Now()); err != nil && !rules.IsRefusal(err) {
		return fmt.Errorf("session: %w", err)
	}
	return nil
}

// renew is the background renewal: at RenewAfter ticks after each
// confirmed grant or renewal it renews, and at Deadline it ends the
// session. A refused renewal ends the session at once, and so does a
// store that must be reopened or whose file was moved. A renewal that
// fails otherwise (the store is unreachable, or the outcome is unknown)
// changes nothing the session relies on: the old deadline stands, and the
// session tries again a tick later, until the deadline.
func (s *Session) renew(ctx context.Context) {
	defer close(s.stopped)
	confirmed := s.Lease().GrantedAt
	next := confirmed + s.opts.renewAfter()
	for {
		deadline := s.Deadline()
		if err := s.clock.Wait(ctx, min(next, deadline)); err != nil {
			return // closed
		}
		if s.Check() != nil {
			return
		}
		now := s.clock.Now()
		renewed, err := s.auth.Renew(ctx, s.Lease(), now, s.opts.TTL)
		switch {
		case err == nil:
			s.mu.Lock()
			if s.err == nil {
				s.lease = renewed
			}
			s.mu.Unlock()
			next = now + s.opts.renewAfter()
		case ctx.Err() != nil:
			return
		case rules.IsRefusal(err):
			s.end(fmt.Errorf("%w: renewal refused: %w", ErrEnded, err))
			return
		case errors.Is(err, leases.ErrReopenRequired), errors.Is(err, leases.ErrDatabaseMoved):
			// No later renewal through this store can succeed: trying
			// every tick until the deadline would only spin.
			s.end(fmt.Errorf("%w: the store can renew no more: %w", ErrEnded, err))
			return
		default:
			next = now + 1
		}
	}
}

func (s *Session) expired() error {
	return fmt.Errorf("%w: the clock reached tick %d; the deadline was tick %d, the lease's expiry %d less the margin %d",
		ErrEnded, s.clock.Now(), s.lease.ExpiresAt-s.opts.Margin, s.lease.ExpiresAt, s.opts.Margin)
}

func (s *Session) end(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endLocked(err)
}

func (s *Session) endLocked(err error) {
	if s.err == nil {
		s.err = err
		close(s.done)
	}
}
