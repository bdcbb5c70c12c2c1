// Package session keeps one lease for a holder: it acquires the lease (at
// once, or waiting until it is free), renews it in the background, and
// ends, on a timer of its own, before the lease could be given to someone
// else. A context of the holder's ([Session.Context]) ends at that same
// moment, so that the work under the lease stops with it. [Do] runs one
// piece of work under a lease, and [Lead] keeps a holder leading for as
// long as its context lives, acquiring again after a loss.
//
// A lease alone does not stop a holder that was paused past its expiry; a
// fenced receiver does (see package leases, and package leases/fence for
// the fence inside your own database transaction). A session narrows the
// window from the holder's side: it stops believing in the lease before
// the lease can expire, by a margin the caller chooses, counted on the
// holder's own clock from the moment it sent the request that granted or
// renewed the lease. Use both: the session so that a holder rarely acts
// late, the fence so that a late action does no harm.
package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"leases"
)

// Session holds one lease. Its epoch never changes: a renewal continues
// the tenure. Its methods are safe for concurrent use.
type Session struct {
	lessor leases.Lessor
	set    settings
	values context.Context // the starting context's values, never cancelled

	// ctx is the holder's context: cancelled, with the session's error as
	// its cause, when the session ends.
	ctx    context.Context
	cancel context.CancelCauseFunc

	// emitting serialises every change of the session's state with the
	// event that reports it, so that events arrive in order.
	emitting sync.Mutex

	mu       sync.Mutex
	lease    leases.Lease // the latest grant or renewal the lessor confirmed
	deadline int64        // the clock's tick at which the session ends; it only moves later
	err      error        // why the session ended; nil while it lives
	failing  error        // the last renewal's failure, when it failed; nil after a confirmed one
	failures int          // renewals that failed in a row

	goroutines sync.WaitGroup // the renewal and the deadline timer
	closed     sync.Once
	closeErr   error
}

// begin starts a session on lease, granted by a request sent at tick
// sent of the session's clock.
func begin(ctx context.Context, lessor leases.Lessor, set settings, lease leases.Lease, sent int64) *Session {
	holderCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	s := &Session{
		lessor: lessor, set: set, values: context.WithoutCancel(ctx),
		ctx: holderCtx, cancel: cancel,
		lease: lease, deadline: sent + set.lifetime,
	}
	s.emitting.Lock()
	s.report(Granted, nil)
	s.emitting.Unlock()
	s.goroutines.Add(2)
	go s.renew(set.beat(sent))
	go s.watchDeadline()
	return s
}

// Lease is the latest lease the lessor confirmed: the grant, or the last
// renewal. Its ticks are the lessor's clock's.
func (s *Session) Lease() leases.Lease {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lease
}

// Epoch is the lease's epoch, the fencing token to send with every write.
func (s *Session) Epoch() int64 { return s.Lease().Epoch }

// Deadline is when the session ends unless a renewal comes first: the
// last confirmed grant or renewal's time-to-live, counted on the session's
// clock from when its request was sent, less the margin and the drift
// allowance. On the wall
// clock it is a wall-clock time; on a manual clock, its ticks as
// milliseconds since the Unix epoch.
func (s *Session) Deadline() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.UnixMilli(s.deadline)
}

// Context is the holder's context: it is cancelled when the session ends,
// at Deadline at the latest whatever a renewal is doing, and then
// context.Cause gives the session's error (matching ErrEnded, and
// ErrLost, ErrDeadline or ErrClosed as the end was: EndReason). Run the
// work the lease guards under it, database transactions included: a
// transaction begun with it is rolled back, not committed, if it ends
// before the COMMIT is sent (one whose COMMIT is on its way has an
// unknown outcome).
func (s *Session) Context() context.Context { return s.ctx }

// Done is closed when the session ends: at Deadline at the latest, on a
// timer of its own whatever a renewal call is doing; as soon as a renewal
// is refused or the store can renew no more; or on Close. It is the
// holder's context's Done. After a pause of the whole process the timer
// may fire later than the holder's own next step: before an action, call
// Check.
func (s *Session) Done() <-chan struct{} { return s.ctx.Done() }

// Check reports whether the session still holds its lease now, reading
// the clock itself rather than trusting the timer to have run: nil while
// the clock is below the deadline, and otherwise an error matching
// ErrEnded (and the session ends). Call it right before an action the
// lease guards, and send Epoch with the action to a fenced receiver.
func (s *Session) Check() error {
	now := s.set.clock.Now()
	s.mu.Lock()
	err, due := s.err, s.err == nil && now >= s.deadline
	s.mu.Unlock()
	if due {
		s.end(s.expired(now))
		return s.Err()
	}
	return err
}

// Err is nil while the session lives, and afterwards says why it ended
// (an error matching ErrEnded).
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Close ends the session and releases its lease, so that the next holder
// need not wait for it to expire. The session's end matches ErrClosed
// (and ctx's error when ctx had ended), or ErrDeadline when the deadline
// had passed already, unnoticed. It always tries: when ctx has already
// ended (a deferred Close after an interrupt), or ends during the
// release, the release runs (again) with a bound of its own,
// Options.CloseTimeout. A lease that expired or was
// lost needs no release and is no error; a release that failed is
// returned, saying so (the lease then runs out by itself). The session is
// over either way. Close may be called more than once; later calls return
// the first call's answer.
func (s *Session) Close(ctx context.Context) error {
	s.closed.Do(func() { s.closeErr = s.close(ctx) })
	return s.closeErr
}

func (s *Session) close(ctx context.Context) error {
	_ = s.Check() // a deadline that passed before its timer ran is the end, not the Close
	s.end(closedBy(ctx))
	s.goroutines.Wait() // no renewal may follow the release
	lease := s.Lease()
	bounded, err := release(ctx, s.lessor, s.set.closeTimeout, lease)
	bound := ""
	if bounded {
		bound = fmt.Sprintf(" (its context had ended; released within a bound of %v)", s.set.closeTimeout)
	}
	switch {
	case err == nil:
		s.set.log.LogAttrs(s.values, slog.LevelInfo, "lease released"+bound,
			slog.String("resource", lease.Resource), slog.String("holder", lease.Holder), slog.Int64("epoch", lease.Epoch))
		return nil
	case leases.IsRefusal(err):
		return nil // expired, or lost: it is not ours to release
	}
	return fmt.Errorf("session: release of %q at epoch %d failed%s; the lease runs out by itself: %w",
		lease.Resource, lease.Epoch, bound, err)
}

// renew is the background renewal: at tick next, and on the next beat
// after each confirmed renewal (beat), it renews. Every renewal runs
// under the holder's context, so that the deadline timer cuts it off: no
// renewal call outlives the session. A refused renewal ends the session at once,
// and so does a store that can renew no more. A renewal that fails
// otherwise (the store is unreachable, or the outcome is unknown) changes
// nothing the session relies on: the deadline stands, and the session
// tries again after a backoff, until the deadline.
func (s *Session) renew(next int64) {
	defer s.goroutines.Done()
	for {
		if err := s.set.clock.Wait(s.ctx, next); err != nil {
			return // ended
		}
		if s.Check() != nil {
			return // the deadline passed while this goroutine was not running
		}
		sent := s.set.clock.Now()
		renewed, err := s.lessor.Renew(s.ctx, s.Lease(), s.set.ttl)
		switch {
		case err == nil:
			s.confirm(renewed, sent)
			next = s.set.beat(sent)
		case s.ctx.Err() != nil:
			return
		case leases.IsRefusal(err):
			s.end(lost(err))
			return
		case storeUnusable(err):
			// No later renewal through this store can succeed: trying
			// until the deadline would only spin.
			s.end(fmt.Errorf("%w: the store can renew no more: %w", ErrEnded, err))
			return
		default:
			next = s.set.clock.Now() + backoff(s.set, s.failed(err))
		}
	}
}

// beatSeed places this process's renewal beats on the wall clock: each
// process renews on beats of its own, so that a fleet does not renew at
// one instant (a test's manual clock has its beats at multiples of
// RenewEvery from tick 0).
var beatSeed = rand.Uint64()

// beat is the session's next renewal after a request sent at tick sent:
// the first beat after it, the beats RenewEvery apart, at the same ticks
// for every session of the process with the same RenewEvery. So the
// renewals of a process's sessions arrive together, and a lessor that
// batches them (etcd: one keep-alive; PostgreSQL: one statement) sends
// one batch a beat, not one a session: with a renewal RenewEvery after
// each session's own grant, L sessions granted at L different times
// would each be a batch of their own. A renewal comes at most
// RenewEvery after the last, as before; the first after a grant can
// come sooner (one renewal more, once a session).
func (set settings) beat(sent int64) int64 {
	off := (sent - set.phase) % set.renewEvery
	if off < 0 {
		off += set.renewEvery
	}
	return sent - off + set.renewEvery
}

// storeUnusable reports errors after which the store answers nothing
// more until it is opened again.
func storeUnusable(err error) bool {
	return errors.Is(err, leases.ErrStoreUnusable)
}

// confirm records a renewal sent at tick sent: the deadline moves to the
// renewal's time-to-live from sent, less the margin, and never earlier. A
// renewal sent at or after the deadline cannot revive the session: the
// holder may have stopped believing in the lease by then.
func (s *Session) confirm(renewed leases.Lease, sent int64) {
	s.emitting.Lock()
	defer s.emitting.Unlock()
	s.mu.Lock()
	if s.err != nil || sent >= s.deadline {
		s.mu.Unlock()
		return
	}
	s.lease = renewed
	s.deadline = max(s.deadline, sent+s.set.lifetime)
	s.failing, s.failures = nil, 0
	s.mu.Unlock()
	s.report(Renewed, nil)
}

// failed reports a renewal that failed without ending the session, as
// transient, and returns how many have failed in a row.
func (s *Session) failed(err error) int {
	s.emitting.Lock()
	defer s.emitting.Unlock()
	s.mu.Lock()
	s.failing, s.failures = err, s.failures+1
	ended, failures := s.err != nil, s.failures
	s.mu.Unlock()
	if !ended {
		s.report(RenewalFailed, transient(err))
	}
	return failures
}

// watchDeadline is the deadline's own timer: it waits on the clock for
// the deadline and ends the session when the clock reaches it, whatever a
// renewal call is doing. A renewal only ever moves the deadline later, so
// a timer that fires at an old deadline finds a later one and waits again:
// nothing need wake it when the deadline moves.
func (s *Session) watchDeadline() {
	defer s.goroutines.Done()
	for {
		s.mu.Lock()
		deadline := s.deadline
		s.mu.Unlock()
		if err := s.set.clock.Wait(s.ctx, deadline); err != nil {
			return // ended
		}
		if s.Check() != nil {
			return
		}
	}
}

// expired is the error of a session whose deadline passed: at tick now.
// It names the renewals that failed before it, but does not match their
// error: the end is definite, whatever they were.
func (s *Session) expired(now int64) error {
	s.mu.Lock()
	late, resource, failing, failures := now-s.deadline, s.lease.Resource, s.failing, s.failures
	s.mu.Unlock()
	msg := fmt.Sprintf("%v %v ago, %v before the lease on %q could expire", ErrDeadline,
		ticksDuration(late), ticksDuration(s.set.margin+s.set.drift), resource)
	if failing != nil {
		msg += fmt.Sprintf(", after %d failed renewals (the last: %v)", failures, failing)
	}
	return &endError{msg: msg, kind: ErrDeadline}
}

// end ends the session with err, once: the holder's context is cancelled
// with err as its cause at once, and the end is reported after. Done must
// not wait for a hook or a log handler that is still busy with an earlier
// event (a slow OnEvent, a blocked log pipe): only the report waits its
// turn, so that events still arrive in order (a renewal confirmed before
// the end is reported before it; one that comes after finds the session
// ended and reports nothing).
func (s *Session) end(err error) {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return
	}
	s.err = err
	s.mu.Unlock()
	s.cancel(err)
	s.emitting.Lock()
	defer s.emitting.Unlock()
	s.report(Ended, err)
}

func (s *Session) event(kind EventKind, err error) Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Event{Kind: kind, Resource: s.lease.Resource, Holder: s.lease.Holder, Epoch: s.lease.Epoch,
		Deadline: time.UnixMilli(s.deadline), Err: err}
}
