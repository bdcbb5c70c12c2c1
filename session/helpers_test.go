package session_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"leases"
	"leases/clock"
	"leases/session"
	"leases/sqlite"
	"leases/testkit/testctx"
)

// tick is one tick of a manual clock, as a session's options say it.
const tick = time.Millisecond

// bench is a session test's setting: a SQLite authority of its own, and a
// manual clock that only the test moves (and that tells a goroutine that
// spins on it).
type bench struct {
	t      *testing.T
	ctx    context.Context
	store  *sqlite.Store
	auth   leases.Authority
	clk    *spinClock
	lessor leases.Lessor

	mu sync.Mutex
	// reported are closed when the session, started by start, reports
	// its end.
	reported map[*session.Session]chan struct{}
}

func newBench(t *testing.T) *bench {
	t.Helper()
	store, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "leases.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	clk := &spinClock{Manual: clock.NewManual(0), spun: make(chan struct{})}
	return &bench{t: t, ctx: testctx.Context(t), store: store, auth: store.Authority(), clk: clk,
		lessor: clock.Lessor(store.Authority(), clk)}
}

// start starts a session on lessor (the bench's own when nil), closed
// when the test ends, and returns once its two goroutines wait on the
// clock.
func (b *bench) start(lessor leases.Lessor, holder string, opts session.Options) *session.Session {
	b.t.Helper()
	if lessor == nil {
		lessor = b.lessor
	}
	if opts.Clock == nil {
		opts.Clock = b.clk // a wrapped lessor hides the clock it is driven by
	}
	reported, onEvent := make(chan struct{}), opts.OnEvent
	opts.OnEvent = func(ev session.Event) {
		if ev.Kind == session.Ended {
			close(reported)
		}
		if onEvent != nil {
			onEvent(ev)
		}
	}
	s, err := session.Start(b.ctx, lessor, "r", holder, opts)
	if err != nil {
		b.t.Fatal(err)
	}
	b.mu.Lock()
	if b.reported == nil {
		b.reported = map[*session.Session]chan struct{}{}
	}
	b.reported[s] = reported
	b.mu.Unlock()
	b.t.Cleanup(func() { _ = s.Close(context.Background()) })
	b.settle(s, b.clk.Now(), 2)
	return s
}

// settle moves the clock to tick and returns once what the move set off
// in s has run: s has ended, or waiters goroutines (s's own two, and any
// other the test has) wait on the clock again. It reports whether s has
// ended. A session that should have ended but goes on waiting is seen at
// once, not at the test's deadline, and so is one that reports its end
// with Done still open, or spins on the clock.
func (b *bench) settle(s *session.Session, tick int64, waiters int) bool {
	b.t.Helper()
	if err := b.clk.Advance(tick); err != nil {
		b.t.Fatal(err)
	}
	waiting, cancel := b.waiters(waiters)
	defer cancel()
	b.mu.Lock()
	reported := b.reported[s] // nil, never ready, for a session start did not start
	b.mu.Unlock()
	select {
	case <-s.Done():
		return true
	case <-reported:
		select {
		case <-s.Done():
			return true
		default:
			b.t.Fatalf("at tick %d: the session reported its end (%v), and Done is still open", tick, s.Err())
			return false
		}
	case <-b.clk.spinning():
		b.t.Fatalf("at tick %d: a goroutine spins on the clock, waiting again and again for a tick it has reached (session ended: %v)", tick, s.Err())
		return false
	case err := <-waiting:
		if err != nil {
			b.t.Fatalf("at tick %d: waiting for %d goroutines to wait on the clock: %v", tick, waiters, err)
		}
		select {
		case <-s.Done():
			return true
		default:
			return false
		}
	}
}

// waiters yields once n goroutines wait on the clock (or with the test's
// end); cancel stops it.
func (b *bench) waiters(n int) (waiting <-chan error, cancel context.CancelFunc) {
	ctx, cancel := context.WithCancel(b.ctx)
	w := make(chan error, 1)
	go func() { w <- b.clk.Waiters(ctx, n) }()
	return w, cancel
}

// await returns what ch yields once it does, and fails the test at once
// when instead n goroutines wait on the clock again (or one spins on it):
// nothing more happens then until the test moves the clock, so what ch
// should yield will not come.
func await[T any](b *bench, ch <-chan T, n int, what string) T {
	b.t.Helper()
	waiting, cancel := b.waiters(n)
	defer cancel()
	select {
	case v := <-ch:
		return v
	case <-b.clk.spinning():
		b.t.Fatalf("waiting for %s: a goroutine spins on the clock", what)
	case err := <-waiting:
		if err != nil {
			b.t.Fatalf("waiting for %s: %v", what, err)
		}
		select {
		case v := <-ch:
			return v
		default:
		}
		b.t.Fatalf("%s never came: %d goroutines wait on the clock again", what, n)
	}
	var zero T
	return zero
}

// deadlineTick is s's deadline in the manual clock's ticks.
func deadlineTick(s *session.Session) int64 { return s.Deadline().UnixMilli() }

// spinClock is the bench's manual clock, which also tells when a
// goroutine spins on it: one that waits again and again for a tick the
// clock has reached, and so never waits, as a session's deadline timer
// that wakes and finds its deadline not yet due would. The tests' waits
// for goroutines to wait on the clock see it at once, rather than at the
// test's deadline.
type spinClock struct {
	*clock.Manual
	mu     sync.Mutex
	passed int           // waits for a reached tick since the last Advance
	spun   chan struct{} // closed once passed reaches spins
}

// spins is how many waits for a reached tick between two moves of the
// clock make a spin: a working session's goroutines wait for a reached
// tick a few times at most after each move.
const spins = 10_000

// Wait implements clock.Clock.
func (c *spinClock) Wait(ctx context.Context, tick int64) error {
	if tick <= c.Now() {
		c.mu.Lock()
		if c.passed++; c.passed == spins {
			close(c.spun)
		}
		c.mu.Unlock()
	}
	return c.Manual.Wait(ctx, tick)
}

// Advance moves the clock to tick, and counts the waits for a reached
// tick afresh.
func (c *spinClock) Advance(tick int64) error {
	c.mu.Lock()
	if c.passed >= spins {
		c.spun = make(chan struct{})
	}
	c.passed = 0
	c.mu.Unlock()
	return c.Manual.Advance(tick)
}

// spinning is closed once a goroutine spins on the clock.
func (c *spinClock) spinning() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.spun
}
