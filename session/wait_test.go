package session_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"leases"
	"leases/clock"
	"leases/session"
	"leases/sqlite"
)

type result struct {
	s   *session.Session
	err error
}

// waitIn runs session.Wait for holder in a goroutine of its own.
func (b *bench) waitIn(lessor leases.Lessor, holder string, opts session.Options) <-chan result {
	if opts.Clock == nil {
		opts.Clock = b.clk
	}
	got := make(chan result, 1)
	go func() {
		s, err := session.Wait(b.ctx, lessor, "r", holder, opts)
		if s != nil {
			b.t.Cleanup(func() { _ = s.Close(context.Background()) })
		}
		got <- result{s, err}
	}()
	return got
}

// waitersOrResult returns once n goroutines wait on the clock, or once
// Wait has returned (then with its result and true).
func (b *bench) waitersOrResult(got <-chan result, n int) (result, bool) {
	b.t.Helper()
	waiting, cancel := b.waiters(n)
	defer cancel()
	select {
	case r := <-got:
		return r, true
	case <-b.clk.spinning():
		b.t.Fatal("a goroutine spins on the clock, waiting again and again for a tick it has reached")
		return result{}, false
	case err := <-waiting:
		if err != nil {
			b.t.Fatal(err)
		}
		return result{}, false
	}
}

// resultAgain is a channel that yields r.
func resultAgain(r result) <-chan result {
	again := make(chan result, 1)
	again <- r
	return again
}

func (b *bench) noResultYet(got <-chan result, when string) {
	b.t.Helper()
	select {
	case r := <-got:
		b.t.Fatalf("%s: Wait returned %+v, %v", when, r.s, r.err)
	default:
	}
}

func (b *bench) result(got <-chan result) result {
	b.t.Helper()
	select {
	case r := <-got:
		return r
	case <-b.clk.spinning():
		b.t.Fatal("Wait did not return: a goroutine spins on the clock")
		return result{}
	case <-b.ctx.Done():
		b.t.Fatal("Wait did not return")
		return result{}
	}
}

// A waiting acquire is granted exactly at the live lease's expiry tick, or
// right after its release, and never earlier.
func TestWaitIsGrantedAtExpiryOrRelease(t *testing.T) {
	for _, released := range []bool{false, true} {
		name := map[bool]string{false: "at the expiry tick", true: "right after a release"}[released]
		t.Run(name, func(t *testing.T) {
			b := newBench(t)
			a := b.start(nil, "A", session.Options{TTL: 5 * tick, Margin: tick, RenewEvery: 3 * tick})
			got := b.waitIn(b.lessor, "B", session.Options{TTL: 5 * tick, Margin: tick})
			b.settle(a, 0, 3) // A's two goroutines, B's wait
			b.settle(a, 2, 3)
			b.noResultYet(got, "at tick 2, while A's lease is live until 5")
			want := int64(5)
			if released {
				want = 2
				if err := a.Close(b.ctx); err != nil {
					t.Fatal(err)
				}
			} else if err := b.clk.Advance(5); err != nil {
				t.Fatal(err)
			}
			r := b.result(got)
			if r.err != nil || r.s.Lease().GrantedAt != want || r.s.Epoch() != 2 {
				t.Fatalf("B: %+v, %v; want epoch 2 granted at tick %d", r.s, r.err, want)
			}
		})
	}
}

// script is a lessor whose acquires fail with the errors in its list,
// one per call, and then go through; it tells each call on calls. An
// unknown outcome comes with the lease it would have granted.
type script struct {
	leases.Lessor
	mu    sync.Mutex
	errs  []error
	calls chan struct{}
}

func (l *script) Acquire(ctx context.Context, resource, holder string, ttl time.Duration) (leases.Lease, error) {
	l.mu.Lock()
	var err error
	if len(l.errs) > 0 {
		err, l.errs = l.errs[0], l.errs[1:]
	}
	l.mu.Unlock()
	l.calls <- struct{}{}
	if errors.Is(err, leases.ErrOutcomeUnknown) {
		// As a lessor does: the lease it would have granted, never
		// granted here.
		return leases.Lease{Resource: resource, Holder: holder, Epoch: 1, ExpiresAt: 1}, err
	}
	if err != nil {
		return leases.Lease{}, err
	}
	return l.Lessor.Acquire(ctx, resource, holder, ttl)
}

// Wait retries everything that is not the caller's fault, backing off
// after failures, and returns at once what is: invalid input, and a store
// that must be opened again.
func TestWaitRetriesWhatIsNotTheCallersFault(t *testing.T) {
	retried := []error{
		fmt.Errorf("acquire: %w", &leases.BackwardsError{Resource: "r", Tick: 0, Last: 1}),
		errors.New("database is locked"), // a failure before commit
		fmt.Errorf("commit: %w", leases.ErrOutcomeUnknown),
		fmt.Errorf("acquire: %w", &leases.HeldError{Live: leases.Lease{Resource: "r", Holder: "A", Epoch: 1, ExpiresAt: 3}, At: 2}),
	}
	for _, err := range retried {
		t.Run("retried: "+err.Error(), func(t *testing.T) {
			b := newBench(t)
			lessor := &script{Lessor: b.lessor, errs: []error{err, err}, calls: make(chan struct{}, 3)}
			got := b.waitIn(lessor, "B", session.Options{TTL: 100 * tick})
			for tick := int64(1); ; tick++ {
				select {
				case r := <-got:
					if r.err != nil {
						t.Fatalf("Wait gave up at tick %d: %v", tick, r.err)
					}
					if len(lessor.calls) != 3 {
						t.Fatalf("granted after %d calls; want 3", len(lessor.calls))
					}
					return
				default:
				}
				if tick > 100 {
					t.Fatal("not granted within the backoff's bounds")
				}
				// Wait backs off on the clock: move it on, once Wait waits
				// (or has returned).
				if r, returned := b.waitersOrResult(got, 1); returned {
					got = resultAgain(r)
					continue
				}
				if err := b.clk.Advance(tick); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
	for _, err := range []error{
		fmt.Errorf("bad: %w", leases.ErrInvalidInput),
		fmt.Errorf("store: %w", sqlite.ErrReopenRequired),
	} {
		t.Run("returned: "+err.Error(), func(t *testing.T) {
			b := newBench(t)
			lessor := &script{Lessor: b.lessor, errs: []error{err}, calls: make(chan struct{}, 2)}
			r := b.result(b.waitIn(lessor, "B", session.Options{TTL: 100 * tick}))
			if !errors.Is(r.err, err) || len(lessor.calls) != 1 {
				t.Fatalf("Wait: %v after %d calls; want %v after one", r.err, len(lessor.calls), err)
			}
		})
	}
	t.Run("only the caller's context ends it", func(t *testing.T) {
		b := newBench(t)
		b.start(nil, "A", session.Options{TTL: 100 * tick, Margin: tick})
		ctx, cancel := context.WithCancelCause(b.ctx)
		stop := errors.New("the caller gave up")
		got := make(chan result, 1)
		go func() {
			s, err := session.Wait(ctx, b.lessor, "r", "B", session.Options{TTL: 100 * tick})
			got <- result{s, err}
		}()
		if r, returned := b.waitersOrResult(got, 3); returned {
			t.Fatalf("Wait returned while A's lease is live: %+v, %v", r.s, r.err)
		}
		cancel(stop)
		if err := b.result(got).err; !errors.Is(err, context.Canceled) || !errors.Is(err, stop) {
			t.Fatalf("Wait after its context ended: %v; want context.Canceled and the cause", err)
		}
	})
}

// Holders whose clocks disagree by less than the margin: a waiter whose
// clock is behind the holder's last renewal is told the lease is held
// (never "invalid input"), and waits for it without an error.
func TestAClockBehindIsNotTheCallersError(t *testing.T) {
	b := newBench(t)
	ahead := clock.NewManual(0)
	holder := clock.Lessor(b.auth, ahead)
	a, err := session.Start(b.ctx, holder, "r", "A", session.Options{TTL: 10 * tick, Margin: 3 * tick, RenewEvery: 2 * tick})
	if err != nil {
		t.Fatal(err)
	}
	if err := ahead.Waiters(b.ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := ahead.Advance(2); err != nil { // A renews at tick 2 of its clock
		t.Fatal(err)
	}
	if err := ahead.Waiters(b.ctx, 2); err != nil {
		t.Fatal(err)
	}
	if a.Lease().ExpiresAt != 12 {
		t.Fatalf("A did not renew: %+v", a.Lease())
	}
	// B's clock, the bench's, is at tick 0: behind A's renewal.
	_, err = session.Start(b.ctx, b.lessor, "r", "B", session.Options{TTL: 10 * tick, Margin: 3 * tick})
	var held *leases.HeldError
	if !errors.As(err, &held) || errors.Is(err, leases.ErrInvalidInput) || held.Live.Holder != "A" {
		t.Fatalf("Start behind A's renewal: %v; want ErrLeaseHeld naming A, not invalid input", err)
	}
	if !strings.Contains(err.Error(), "for another 12ms") {
		t.Fatalf("the refusal %q should say how long in durations", err)
	}
	if err := a.Close(b.ctx); err != nil {
		t.Fatal(err)
	}
	// Released at A's tick 2: B, at tick 0, waits until its clock gets
	// there, and is granted then.
	got := b.waitIn(b.lessor, "B", session.Options{TTL: 10 * tick, Margin: 3 * tick})
	if r, returned := b.waitersOrResult(got, 1); returned {
		t.Fatalf("at tick 0, behind the release at 2: Wait returned %+v, %v", r.s, r.err)
	}
	if err := b.clk.Advance(2); err != nil {
		t.Fatal(err)
	}
	if r := b.result(got); r.err != nil || r.s.Lease().GrantedAt != 2 || r.s.Epoch() != 2 {
		t.Fatalf("B: %+v, %v; want epoch 2 granted at tick 2", r.s, r.err)
	}
}

// slowGrant is a lessor whose first grant comes back only once the clock
// has reached late: the answer of a store that stalled.
type slowGrant struct {
	leases.Lessor
	clk  *spinClock
	late int64
	once sync.Once
}

func (l *slowGrant) Acquire(ctx context.Context, resource, holder string, ttl time.Duration) (leases.Lease, error) {
	lease, err := l.Lessor.Acquire(ctx, resource, holder, ttl)
	l.once.Do(func() { err = errors.Join(err, l.clk.Advance(l.late)) })
	return lease, err
}

// A grant whose answer comes back after the session's deadline is no
// lease to work under: Wait releases it and waits again, and returns a
// session that is live. (The chaos test met this: a worker stopped while
// it held the lessor's write lock held every other acquire past its
// deadline, and Do then ran its work with a context that had ended.)
func TestWaitReturnsOnlyALiveSession(t *testing.T) {
	b := newBench(t)
	opts := session.Options{TTL: 10 * tick, Margin: 2 * tick}
	lessor := &slowGrant{Lessor: b.lessor, clk: b.clk, late: 9} // the deadline is at 8
	r := b.result(b.waitIn(lessor, "B", opts))
	if r.err != nil {
		t.Fatal(r.err)
	}
	if err := r.s.Check(); err != nil || r.s.Epoch() != 2 || r.s.Lease().GrantedAt != 9 {
		t.Fatalf("Wait returned epoch %d granted at tick %d, checking %v; want a live session, epoch 2 granted at tick 9",
			r.s.Epoch(), r.s.Lease().GrantedAt, err)
	}
	if _, live, err := b.auth.Lease(b.ctx, "r", 9); err != nil || !live {
		t.Fatalf("the holder at tick 9: live %v, %v", live, err)
	}
}

// supersededGrant is a lessor whose first grant comes back only once the
// clock has reached late and, the grant having expired meanwhile, another
// holder whose clock is ahead was granted the resource at tick ahead. It
// keeps what the releases it passes on answered.
type supersededGrant struct {
	leases.Lessor
	auth        leases.Authority
	clk         *spinClock
	late, ahead int64
	once        sync.Once
	mu          sync.Mutex
	released    []error
}

func (l *supersededGrant) Acquire(ctx context.Context, resource, holder string, ttl time.Duration) (leases.Lease, error) {
	lease, err := l.Lessor.Acquire(ctx, resource, holder, ttl)
	l.once.Do(func() {
		err = errors.Join(err, l.clk.Advance(l.late))
		_, cerr := l.auth.Acquire(ctx, resource, "C", l.ahead, 10)
		err = errors.Join(err, cerr)
	})
	return lease, err
}

func (l *supersededGrant) Release(ctx context.Context, held leases.Lease) error {
	err := l.Lessor.Release(ctx, held)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.released = append(l.released, err)
	return err
}

// A grant that came back after the session's deadline, and that another
// holder was granted after: its release is refused because the lease was
// changed at a later tick than the release's (ErrTickBackwards), which
// says it was superseded, so nothing is left to release; Wait waits for
// the other holder's lease and returns a session of its own. (The chaos
// test met this on etcd beside busy loops, and its history check took
// that refusal for a grant left held: tests/history, grantsReportedOrReleased.)
func TestWaitGoesOnAfterALateGrantWasSuperseded(t *testing.T) {
	b := newBench(t)
	opts := session.Options{TTL: 10 * tick, Margin: 2 * tick}
	// B's grant at tick 0 expires at 10 (its deadline is at 8), C's at 13
	// lasts until 23, and B's release comes at 12.
	lessor := &supersededGrant{Lessor: b.lessor, auth: b.auth, clk: b.clk, late: 12, ahead: 13}
	got := b.waitIn(lessor, "B", opts)
	if r, done := b.waitersOrResult(got, 1); done {
		t.Fatalf("Wait returned %+v, %v while C holds the lease", r.s, r.err)
	}
	lessor.mu.Lock()
	released := lessor.released
	lessor.mu.Unlock()
	if len(released) != 1 || !errors.Is(released[0], leases.ErrTickBackwards) {
		t.Fatalf("the releases of the late grant answered %v; want one refusal, the tick runs backwards", released)
	}
	if _, live, err := b.auth.Lease(b.ctx, "r", 12); err != nil || !live {
		t.Fatalf("C's lease at tick 12: live %v, %v", live, err)
	}
	if err := b.clk.Advance(23); err != nil {
		t.Fatal(err)
	}
	r := b.result(got)
	if r.err != nil || r.s.Epoch() != 3 || r.s.Lease().GrantedAt != 23 {
		t.Fatalf("B: %+v, %v; want epoch 3 granted at tick 23, at C's expiry", r.s, r.err)
	}
}
