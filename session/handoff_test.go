package session_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"leases"
	"leases/session"
)

// holding reports whether the bench's authority has holder's lease on "r"
// live at the clock's tick (the tests' clocks never reach its expiry: a
// lease that is not live was released).
func (b *bench) holding(holder string) bool {
	b.t.Helper()
	held, live, err := b.auth.Lease(b.ctx, "r", b.clk.Now())
	if err != nil {
		b.t.Fatal(err)
	}
	return live && held.Holder == holder
}

// releases is a lessor that tells of the first release it is asked for.
type releases struct {
	leases.Lessor
	first chan struct{}
	once  sync.Once
}

func (l *releases) Release(ctx context.Context, held leases.Lease) error {
	l.once.Do(func() { close(l.first) })
	return l.Lessor.Release(ctx, held)
}

// When the caller's context ends (a shutdown) while the work under the
// lease still runs, the lease is kept, and renewed, until the work has
// returned, and released at once then: the next holder is never granted
// while the work may act, and never has to wait for the lease to expire.
// The work winds down until the session has renewed after the shutdown,
// or until a release comes first, which is the failure.
func TestTheReleaseWaitsForTheWork(t *testing.T) {
	// Each runs the work under holder A's lease, until ctx ends.
	runs := map[string]func(ctx context.Context, lessor leases.Lessor, opts session.Options, work func(ctx context.Context)) error{
		"Do": func(ctx context.Context, lessor leases.Lessor, opts session.Options, work func(context.Context)) error {
			return session.Do(ctx, lessor, "r", "A", opts, func(ctx context.Context, _ *session.Session) error {
				work(ctx)
				return nil
			})
		},
		"Lead": func(ctx context.Context, lessor leases.Lessor, opts session.Options, work func(context.Context)) error {
			return session.Lead(ctx, lessor, "r", "A", opts, session.Leader{
				OnStarted: func(ctx context.Context, _ *session.Session) { work(ctx) },
			})
		},
	}
	for name, run := range runs {
		t.Run(name, func(t *testing.T) {
			b := newBench(t)
			lessor := &releases{Lessor: b.lessor, first: make(chan struct{})}
			ctx, shutdown := context.WithCancel(b.ctx)
			started, stopping, mayReturn := make(chan struct{}), make(chan struct{}), make(chan struct{})
			renewed := make(chan struct{}, 8)
			var releasedUnderWork atomic.Bool
			opts := session.Options{TTL: 100 * tick, Margin: 20 * tick, RenewEvery: 30 * tick, Clock: b.clk,
				OnEvent: func(ev session.Event) {
					if ev.Kind == session.Renewed {
						renewed <- struct{}{}
					}
				}}
			returned := make(chan error, 1)
			go func() {
				returned <- run(ctx, lessor, opts, func(ctx context.Context) {
					close(started)
					<-ctx.Done()
					close(stopping)
					select { // the work winds down
					case <-mayReturn:
					case <-lessor.first:
						releasedUnderWork.Store(true)
					}
				})
			}()
			<-started
			shutdown()
			<-stopping
			if err := b.clk.Advance(30); err != nil { // the session renews while the work winds down
				t.Fatal(err)
			}
			waiting, cancel := b.waiters(2) // the session's two goroutines wait again: no renewal came
			select {
			case <-renewed:
			case <-lessor.first:
			case err := <-waiting:
				select { // a renewal reports before its goroutine waits again
				case <-renewed:
				case <-lessor.first:
				default:
					t.Fatalf("the session did not renew at tick 30 (%v)", err)
				}
			}
			cancel()
			close(mayReturn)
			if err := <-returned; err != nil && !errors.Is(err, context.Canceled) {
				t.Fatalf("%s returned %v", name, err)
			}
			if releasedUnderWork.Load() {
				t.Fatal("the lease was released while the work under it still ran")
			}
			if b.holding("A") { // the clock never reached the expiry: not run out, released
				t.Fatal("the lease is still held once the work returned after the shutdown")
			}
		})
	}
}

// With Options.Grace, Do and Lead wait that long, on the session's clock,
// for work that does not stop, and then return ErrWorkRunning without
// releasing the lease (the work may still act): it runs out by itself.
// Before the grace has passed they wait.
func TestGraceBoundsTheWaitForTheWork(t *testing.T) {
	for _, lead := range []bool{false, true} {
		name := map[bool]string{false: "Do", true: "Lead"}[lead]
		t.Run(name, func(t *testing.T) {
			b := newBench(t)
			ctx, shutdown := context.WithCancel(b.ctx)
			opts := session.Options{TTL: 100 * tick, Margin: 20 * tick, Clock: b.clk, Grace: 5 * tick}
			started, stuck := make(chan struct{}), make(chan struct{})
			t.Cleanup(func() { close(stuck) })
			work := func(context.Context) {
				close(started)
				<-stuck // ignores its context
			}
			returned := make(chan result, 1)
			go func() {
				if lead {
					returned <- result{err: session.Lead(ctx, b.lessor, "r", "A", opts, session.Leader{
						OnStarted: func(ctx context.Context, _ *session.Session) { work(ctx) }})}
					return
				}
				returned <- result{err: session.Do(ctx, b.lessor, "r", "A", opts, func(ctx context.Context, _ *session.Session) error {
					work(ctx)
					return nil
				})}
			}()
			<-started
			shutdown()
			// The renewal, the deadline and the grace wait on the clock;
			// a tick before the grace has passed, they wait again.
			for _, tick := range []int64{0, 4} {
				if err := b.clk.Advance(tick); err != nil {
					t.Fatal(err)
				}
				if r, early := b.waitersOrResult(returned, 3); early {
					t.Fatalf("%s returned at tick %d, before the grace had passed: %v", name, tick, r.err)
				}
			}
			if err := b.clk.Advance(5); err != nil {
				t.Fatal(err)
			}
			err := (<-returned).err
			if !errors.Is(err, session.ErrWorkRunning) || !errors.Is(err, context.Canceled) {
				t.Fatalf("%s after the grace: %v; want ErrWorkRunning, and the shutdown", name, err)
			}
			if !b.holding("A") {
				t.Fatal("the lease was released while the work under it still ran")
			}
		})
	}
}

// Work that returns in time is released at once, grace or not; the
// grace is a bound, not a wait.
func TestGraceIsABoundNotAWait(t *testing.T) {
	b := newBench(t)
	ctx, shutdown := context.WithCancel(b.ctx)
	err := session.Do(ctx, b.lessor, "r", "A", session.Options{TTL: 100 * tick, Margin: 20 * tick, Clock: b.clk, Grace: time.Hour},
		func(ctx context.Context, _ *session.Session) error {
			shutdown()
			<-ctx.Done()
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if b.holding("A") {
		t.Fatal("still held after Do returned")
	}
}

// Work that panics, or ends its goroutine (runtime.Goexit, as a test's
// t.Fatal does), has returned: Do releases the lease and then does the
// same in its caller's goroutine.
func TestDoReleasesAfterAPanicOrGoexit(t *testing.T) {
	for _, how := range []string{"panic", "goexit"} {
		t.Run(how, func(t *testing.T) {
			b := newBench(t)
			opts := session.Options{TTL: 100 * tick, Margin: 20 * tick, Clock: b.clk}
			raised := make(chan any, 1)
			go func() {
				defer func() { raised <- recover() }()
				_ = session.Do(b.ctx, b.lessor, "r", "A", opts, func(context.Context, *session.Session) error {
					if how == "panic" {
						panic("the work failed")
					}
					runtime.Goexit()
					return nil
				})
				raised <- "Do returned"
			}()
			got := <-raised
			if want := map[string]any{"panic": "the work failed", "goexit": nil}[how]; got != want {
				t.Fatalf("Do's caller saw %v; want %v", got, want)
			}
			if b.holding("A") {
				t.Fatal("the lease is still held")
			}
		})
	}
}
