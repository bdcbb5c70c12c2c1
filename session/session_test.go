package session_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"leases"
	"leases/session"
	"leases/sqlite"
)

// Options that make no sense are refused with ErrInvalidInput before
// anything is sent, each at its edge; the zero value works.
func TestOptionsAreChecked(t *testing.T) {
	cases := []struct {
		name string
		opts session.Options
		ok   bool
	}{
		{"the zero value", session.Options{}, true},
		{"TTL of one tick", session.Options{TTL: tick, RenewEvery: 0}, false}, // TTL/5 rounds up to the whole TTL
		{"TTL of two ticks, margin one", session.Options{TTL: 2 * tick, Margin: tick}, true},
		{"TTL below a tick", session.Options{TTL: 10}, false},
		{"TTL just below a tick", session.Options{TTL: tick - 1, Margin: 1}, false},
		{"negative TTL", session.Options{TTL: -time.Second}, false},
		{"negative margin", session.Options{TTL: time.Second, Margin: -1}, false},
		{"margin equal to the TTL", session.Options{TTL: time.Second, Margin: time.Second}, false},
		{"margin just below the TTL, no drift allowance", session.Options{TTL: time.Second, Margin: time.Second - tick, Drift: 0.0009}, true},
		{"margin and drift allowance leave nothing", session.Options{TTL: time.Second, Margin: time.Second - tick}, false},
		{"negative drift", session.Options{TTL: time.Second, Drift: -0.001}, false},
		{"drift of a half", session.Options{TTL: time.Second, Drift: 0.5}, false},
		{"drift just below a half", session.Options{TTL: time.Second, Margin: 200 * tick, Drift: 0.49}, true},
		{"margin that rounds up to the TTL", session.Options{TTL: time.Second, Margin: time.Second - tick + 1}, false},
		{"negative renewal", session.Options{TTL: time.Second, RenewEvery: -tick}, false},
		{"renewal below a tick", session.Options{TTL: time.Second, RenewEvery: 1}, false},
		{"renewal at the deadline", session.Options{TTL: time.Second, Margin: 200 * tick, RenewEvery: 799 * tick}, false},
		{"renewal just before the deadline", session.Options{TTL: time.Second, Margin: 200 * tick, RenewEvery: 798 * tick}, true},
		{"renewal of one tick", session.Options{TTL: time.Second, RenewEvery: tick}, true},
		{"margin of one tick", session.Options{TTL: time.Second, Margin: tick}, true},
		{"margin below a tick, rounded up", session.Options{TTL: 2 * tick, Margin: 1, Drift: 0.0009}, true},
		{"negative close timeout", session.Options{TTL: time.Second, CloseTimeout: -1}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newBench(t)
			s, err := session.Start(b.ctx, b.lessor, "r", "A", tc.opts)
			if tc.ok {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				_ = s.Close(b.ctx)
				return
			}
			if !errors.Is(err, leases.ErrInvalidInput) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("got %v; want one line matching ErrInvalidInput", err)
			}
			if _, live, _ := b.auth.Lease(b.ctx, "r", 0); live {
				t.Fatal("the lease was acquired anyway")
			}
		})
	}
	t.Run("a TTL meant as seconds says so", func(t *testing.T) {
		_, err := session.Start(t.Context(), newBench(t).lessor, "r", "A", session.Options{TTL: 10})
		if err == nil || !strings.Contains(err.Error(), "10 * time.Second") {
			t.Fatalf("TTL: 10 got %v; want a hint at time.Second", err)
		}
	})
	t.Run("defaults", func(t *testing.T) {
		b := newBench(t)
		s := b.start(nil, "A", session.Options{})
		// 15 s, ending 3 s early and 15 ms more for drift, renewing every
		// third of the 11.985 s that leaves.
		if got := s.Lease(); got.ExpiresAt != 15_000 || deadlineTick(s) != 11_985 {
			t.Fatalf("lease %+v, deadline %d; want expiry 15000, deadline 11985", got, deadlineTick(s))
		}
		b.settle(s, 3_994, 2)
		if s.Lease().ExpiresAt != 15_000 {
			t.Fatalf("renewed before 3.995 s: %+v", s.Lease())
		}
		b.settle(s, 3_995, 2)
		if got := s.Lease(); got.ExpiresAt != 18_995 || deadlineTick(s) != 15_980 {
			t.Fatalf("at 3.995 s: lease %+v, deadline %d; want expiry 18995, deadline 15980", got, deadlineTick(s))
		}
	})
}

// The session renews RenewEvery after each confirmed renewal, keeps its
// epoch, and its deadline follows the last confirmed renewal.
func TestSessionRenewsOnSchedule(t *testing.T) {
	b := newBench(t)
	s := b.start(nil, "A", session.Options{TTL: 10 * tick, Margin: 2 * tick, RenewEvery: 4 * tick})
	steps := []struct {
		tick         int64
		wantExpiry   int64
		wantDeadline int64
	}{
		{3, 10, 8},  // before RenewEvery: nothing happens
		{4, 14, 12}, // renewed at 4
		{7, 14, 12},
		{8, 18, 16}, // renewed at 8
		{15, 25, 23},
	}
	for _, step := range steps {
		if b.settle(s, step.tick, 2) {
			t.Fatalf("ended at tick %d: %v", step.tick, s.Err())
		}
		if got := s.Lease(); got.Epoch != 1 || got.ExpiresAt != step.wantExpiry || deadlineTick(s) != step.wantDeadline {
			t.Fatalf("at tick %d: lease %+v, deadline %d; want epoch 1 expiring at %d, deadline %d",
				step.tick, got, deadlineTick(s), step.wantExpiry, step.wantDeadline)
		}
		if err := s.Check(); err != nil {
			t.Fatalf("at tick %d: %v", step.tick, err)
		}
	}
	if _, err := b.auth.Acquire(b.ctx, "r", "B", 24, 10); !errors.Is(err, leases.ErrLeaseHeld) {
		t.Fatalf("another holder before the renewed expiry: %v; want ErrLeaseHeld", err)
	}
}

// The sessions of a process renew on one beat: each renews at the first
// multiple of RenewEvery after its grant or confirmed renewal, never
// later than RenewEvery after it, so that sessions granted at different
// ticks renew at the same ticks, and a lessor that batches renewals
// (etcd, PostgreSQL) sends one batch a beat, not one a session.
func TestSessionsRenewOnOneBeat(t *testing.T) {
	b := newBench(t)
	renewals := &renewalTicks{Lessor: b.lessor, clk: b.clk, at: map[string][]int64{}}
	opts := session.Options{TTL: 10 * tick, Margin: 2 * tick, RenewEvery: 4 * tick, Clock: b.clk}
	var sessions []*session.Session
	for _, grant := range []struct {
		tick   int64
		holder string
	}{{0, "A"}, {1, "B"}, {3, "C"}} {
		if err := b.clk.Advance(grant.tick); err != nil {
			t.Fatal(err)
		}
		s, err := session.Start(b.ctx, renewals, "r-"+grant.holder, grant.holder, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close(context.Background()) })
		sessions = append(sessions, s)
	}
	for tk := int64(3); tk <= 12; tk++ {
		if err := b.clk.Advance(tk); err != nil {
			t.Fatal(err)
		}
		// Until the three sessions' six goroutines wait on the clock
		// again; a session that ends (a renewal too late) fails the test
		// at once rather than leave the count short until the deadline.
		waiting, cancel := b.waiters(6)
		select {
		case err := <-waiting:
			if err != nil {
				t.Fatalf("at tick %d: %v", tk, err)
			}
		case <-sessions[0].Done():
		case <-sessions[1].Done():
		case <-sessions[2].Done():
		}
		cancel()
		for _, s := range sessions {
			if s.Err() != nil {
				t.Fatalf("%s ended at tick %d: %v", s.Lease().Holder, tk, s.Err())
			}
		}
	}
	want := []int64{4, 8, 12} // B and C were granted at 1 and 3: their first renewal comes sooner
	for _, holder := range []string{"A", "B", "C"} {
		if got := renewals.ticks(holder); !slices.Equal(got, want) {
			t.Errorf("%s renewed at ticks %v; want %v", holder, got, want)
		}
	}
}

// renewalTicks is a lessor that notes the tick of every renewal, by
// holder.
type renewalTicks struct {
	leases.Lessor
	clk interface{ Now() int64 }
	mu  sync.Mutex
	at  map[string][]int64
}

func (l *renewalTicks) Renew(ctx context.Context, held leases.Lease, ttl time.Duration) (leases.Lease, error) {
	l.mu.Lock()
	l.at[held.Holder] = append(l.at[held.Holder], l.clk.Now())
	l.mu.Unlock()
	return l.Lessor.Renew(ctx, held, ttl)
}

func (l *renewalTicks) ticks(holder string) []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.at[holder])
}

// When renewals fail, Done closes at the deadline, the margin before the
// expiry tick at which another holder is granted, and never later.
func TestSessionEndsBeforeTheNextGrant(t *testing.T) {
	cases := []struct {
		name string
		// breakRenewals makes every renewal from now on fail, or be refused.
		breakRenewals func(t *testing.T, b *bench, s *session.Session)
		wantEndAt     int64 // the tick at which Done must be closed
	}{
		{"the store is gone: renewals fail until the deadline", func(t *testing.T, b *bench, _ *session.Session) {
			if err := b.store.Close(); err != nil {
				t.Fatal(err)
			}
		}, 8},
		{"the lease was released: the next renewal is refused", func(t *testing.T, b *bench, s *session.Session) {
			if err := b.auth.Release(context.Background(), s.Lease(), 1); err != nil {
				t.Fatal(err)
			}
		}, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newBench(t)
			s := b.start(nil, "A", session.Options{TTL: 10 * tick, Margin: 2 * tick, RenewEvery: 3 * tick})
			tc.breakRenewals(t, b, s)
			for tick := int64(1); tick < tc.wantEndAt; tick++ {
				if b.settle(s, tick, 2) {
					t.Fatalf("Done closed at tick %d, before %d: %v", tick, tc.wantEndAt, s.Err())
				}
			}
			if !b.settle(s, tc.wantEndAt, 2) {
				t.Fatalf("Done still open at tick %d", tc.wantEndAt)
			}
			if err := s.Check(); !errors.Is(err, session.ErrEnded) {
				t.Fatalf("Check after the end: %v; want ErrEnded", err)
			}
		})
	}
}

// A process paused past its deadline learns it from Check at once, even
// before the deadline timer has run.
func TestSessionCheckReadsTheClockItself(t *testing.T) {
	b := newBench(t)
	s := b.start(nil, "A", session.Options{TTL: 10 * tick, Margin: 2 * tick, RenewEvery: 7 * tick})
	if err := s.Check(); err != nil {
		t.Fatalf("at tick 0: %v", err)
	}
	if err := b.clk.Advance(7); err != nil {
		t.Fatal(err)
	}
	if err := s.Check(); err != nil {
		t.Fatalf("at tick 7, before the deadline 8: %v", err)
	}
	if err := b.clk.Advance(8); err != nil { // the rest of the pause at once
		t.Fatal(err)
	}
	if err := s.Check(); !errors.Is(err, session.ErrEnded) {
		t.Fatalf("Check at the deadline: %v; want ErrEnded", err)
	}
	select {
	case <-s.Done(): // Check ended it
	default:
		t.Fatal("Check said the session ended, and Done is still open")
	}
}

// stuck is a lessor whose renewals hang until their context ends, as a
// call to a partitioned or stopped etcd member does, and tell when they
// begin.
type stuck struct {
	leases.Lessor
	renewing  chan context.Context
	testEnded chan struct{}
}

func (l stuck) Renew(ctx context.Context, _ leases.Lease, _ time.Duration) (leases.Lease, error) {
	l.renewing <- ctx
	select {
	case <-ctx.Done():
		return leases.Lease{}, context.Cause(ctx)
	case <-l.testEnded:
		return leases.Lease{}, errors.New("the test ended")
	}
}

// Done closes at the deadline whatever a renewal is doing, the holder's
// context with it, and the hanging renewal's context ends then too: no
// renewal outlives the session.
func TestDoneComesAtTheDeadlineWhateverARenewalDoes(t *testing.T) {
	b := newBench(t)
	lessor := stuck{b.lessor, make(chan context.Context, 1), make(chan struct{})}
	s := b.start(lessor, "A", session.Options{TTL: 10 * tick, Margin: 2 * tick, RenewEvery: 4 * tick})
	t.Cleanup(func() { close(lessor.testEnded) }) // runs before the session's Close
	if err := b.clk.Advance(4); err != nil {
		t.Fatal(err)
	}
	renewal := await(b, lessor.renewing, 2, "the renewal due at tick 4")
	if ended := b.settle(s, 7, 1); ended { // only the deadline timer waits now
		t.Fatalf("ended at tick 7, before the deadline 8: %v", s.Err())
	}
	if !b.settle(s, 8, 1) {
		t.Fatal("Done still open at the deadline, while a renewal hangs")
	}
	if cause := context.Cause(s.Context()); !errors.Is(cause, session.ErrEnded) {
		t.Fatalf("the holder's context ended with %v; want ErrEnded as its cause", cause)
	}
	if renewal.Err() == nil {
		t.Fatal("the hanging renewal's context is still live after the session ended")
	}
}

// Done closes at the deadline also while the event hook (or a log
// handler) is still busy with an earlier event: here the hook hangs on a
// failed renewal's event. Only the report of the end waits for it.
func TestDoneComesAtTheDeadlineWhateverTheHookDoes(t *testing.T) {
	b := newBench(t)
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	opts := session.Options{TTL: 10 * tick, Margin: 2 * tick, RenewEvery: 4 * tick,
		OnEvent: func(ev session.Event) {
			if ev.Kind == session.RenewalFailed {
				once.Do(func() { close(entered) })
				<-release
			}
		}}
	s := b.start(renewFails{b.lessor, errors.New("the store is unreachable")}, "A", opts)
	t.Cleanup(func() { close(release) }) // runs before the session's Close
	if err := b.clk.Advance(4); err != nil {
		t.Fatal(err)
	}
	await(b, entered, 2, "the failed renewal's event") // the renewal goroutine is in the hook, and stays there
	if ended := b.settle(s, 7, 1); ended {
		t.Fatalf("ended at tick 7, before the deadline 8: %v", s.Err())
	}
	if !b.settle(s, 8, 1) {
		t.Fatal("Done still open at the deadline, while the hook is busy")
	}
}

// recording is a lessor that notes the tick of every renewal it is asked
// for.
type recording struct {
	leases.Lessor
	clk *spinClock
	mu  sync.Mutex
	at  []int64
}

func (l *recording) Renew(ctx context.Context, held leases.Lease, ttl time.Duration) (leases.Lease, error) {
	l.mu.Lock()
	l.at = append(l.at, l.clk.Now())
	l.mu.Unlock()
	return l.Lessor.Renew(ctx, held, ttl)
}

// No renewal is sent at or after the deadline, even when the renewal
// wakes at the same tick as the deadline timer (a process resumed after a
// pause): the holder stopped believing in the lease at the deadline, and
// a renewal then must not revive the session.
func TestNoRenewalAfterTheDeadline(t *testing.T) {
	b := newBench(t)
	lessor := &recording{Lessor: b.lessor, clk: b.clk}
	s := b.start(lessor, "A", session.Options{TTL: 10 * tick, Margin: 2 * tick, RenewEvery: 4 * tick})
	if !b.settle(s, 8, 2) { // the renewal due at 4 and the deadline at 8 wake together
		t.Fatalf("still live at its deadline, lease %+v", s.Lease())
	}
	if err := s.Close(b.ctx); err != nil { // waits for the renewal goroutine
		t.Fatal(err)
	}
	if got := s.Lease(); got.ExpiresAt != 10 || len(lessor.at) != 0 {
		t.Fatalf("renewals sent at ticks %v, lease %+v; want none, and the lease as granted", lessor.at, got)
	}
}

// renewFails is a lessor whose renewals fail with err: the store as a
// session sees it after an unknown outcome (SQLite then refuses every call
// until it is reopened) or once its file was moved.
type renewFails struct {
	leases.Lessor
	err error
}

func (l renewFails) Renew(context.Context, leases.Lease, time.Duration) (leases.Lease, error) {
	return leases.Lease{}, l.err
}

// A store that can renew no more ends the session at its first failed
// renewal, rather than being tried until the deadline.
func TestSessionEndsWhenTheStoreCanRenewNoMore(t *testing.T) {
	for _, cause := range []error{sqlite.ErrReopenRequired, sqlite.ErrDatabaseMoved} {
		t.Run(cause.Error(), func(t *testing.T) {
			b := newBench(t)
			s := b.start(renewFails{b.lessor, fmt.Errorf("renew: %w", cause)}, "A",
				session.Options{TTL: 10 * tick, Margin: 2 * tick, RenewEvery: 4 * tick})
			if b.settle(s, 3, 2) {
				t.Fatalf("ended before the first renewal: %v", s.Err())
			}
			if !b.settle(s, 4, 2) {
				t.Fatal("Done still open after a renewal that can never succeed")
			}
			if err := s.Err(); !errors.Is(err, session.ErrEnded) || !errors.Is(err, cause) {
				t.Fatalf("ended with %v; want ErrEnded and %v", err, cause)
			}
		})
	}
}

// Close releases the lease even when its context has already ended (the
// deferred Close after an interrupt), and says what happened.
func TestCloseAlwaysTries(t *testing.T) {
	t.Run("a done context still releases", func(t *testing.T) {
		b := newBench(t)
		s := b.start(nil, "A", session.Options{TTL: 10 * tick, Margin: 2 * tick})
		done, cancel := context.WithCancel(b.ctx)
		cancel()
		if err := s.Close(done); err != nil {
			t.Fatal(err)
		}
		if held, live, err := b.auth.Lease(b.ctx, "r", 0); err != nil || live {
			t.Fatalf("after Close with a done context the lease is %+v, live %v, %v; want released", held, live, err)
		}
		if err := s.Close(b.ctx); err != nil {
			t.Fatalf("a second Close: %v", err)
		}
	})
	t.Run("a failed release is said", func(t *testing.T) {
		b := newBench(t)
		s := b.start(nil, "A", session.Options{TTL: 10 * tick, Margin: 2 * tick})
		if err := b.store.Close(); err != nil {
			t.Fatal(err)
		}
		err := s.Close(b.ctx)
		if err == nil || !strings.Contains(err.Error(), "runs out by itself") {
			t.Fatalf("Close on a closed store: %v; want an error saying the lease runs out by itself", err)
		}
	})
	t.Run("a lost lease needs no release", func(t *testing.T) {
		b := newBench(t)
		s := b.start(nil, "A", session.Options{TTL: 10 * tick, Margin: 2 * tick})
		if _, err := b.auth.Acquire(b.ctx, "r", "B", 10, 5); err != nil {
			t.Fatal(err)
		}
		b.settle(s, 10, 0)
		if err := s.Close(b.ctx); err != nil {
			t.Fatalf("Close after the lease went to B: %v", err)
		}
		if held, _, _ := b.auth.Lease(b.ctx, "r", 10); held.Holder != "B" {
			t.Fatalf("B's lease was touched: %+v", held)
		}
	})
}
