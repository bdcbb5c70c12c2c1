package session_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"leases"
	"leases/session"
)

// Do runs fn under the lease and releases it after; fn's error comes
// back, and so does the session's end when the lease ran out under fn.
func TestDoRunsUnderTheLeaseAndReleases(t *testing.T) {
	opts := session.Options{TTL: 10 * tick, Margin: 2 * tick}
	t.Run("released after", func(t *testing.T) {
		b := newBench(t)
		opts := opts
		opts.Clock = b.clk
		err := session.Do(b.ctx, b.lessor, "r", "A", opts, func(ctx context.Context, s *session.Session) error {
			if held, live, err := b.auth.Lease(ctx, "r", 0); err != nil || !live || held != s.Lease() {
				t.Errorf("under Do the authority has %+v, live %v, %v; want the session's lease", held, live, err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, live, _ := b.auth.Lease(b.ctx, "r", 0); live {
			t.Fatal("the lease is still held after Do returned")
		}
	})
	t.Run("fn's error", func(t *testing.T) {
		b := newBench(t)
		failed := errors.New("the work failed")
		opts := opts
		opts.Clock = b.clk
		if err := session.Do(b.ctx, b.lessor, "r", "A", opts, func(context.Context, *session.Session) error { return failed }); !errors.Is(err, failed) || errors.Is(err, session.ErrEnded) {
			t.Fatalf("Do: %v; want fn's error alone", err)
		}
	})
	t.Run("the lease ran out under fn", func(t *testing.T) {
		b := newBench(t)
		opts := opts
		opts.Clock = b.clk
		err := session.Do(b.ctx, b.lessor, "r", "A", opts, func(ctx context.Context, s *session.Session) error {
			// The work took too long: the session ends at its deadline
			// (settle fails at once if it does not), and fn's context
			// with it.
			if !b.settle(s, deadlineTick(s), 2) {
				t.Fatalf("the session lived on past its deadline, lease %+v", s.Lease())
			}
			<-ctx.Done()
			return nil
		})
		if !errors.Is(err, session.ErrEnded) {
			t.Fatalf("Do: %v; want ErrEnded: fn may have acted without the lease", err)
		}
	})
}

// Lead calls OnStarted when it leads, OnStopped when it stops, and leads
// again, at a new epoch, after it lost the lease; it returns when its
// context ends.
func TestLeadLeadsAgainAfterALoss(t *testing.T) {
	b := newBench(t)
	ctx, stop := context.WithCancel(b.ctx)
	started := make(chan *session.Session)
	stopped := make(chan error, 2)
	ended := make(chan error, 1)
	go func() {
		ended <- session.Lead(ctx, b.lessor, "r", "A",
			session.Options{TTL: 10 * tick, Margin: 2 * tick, RenewEvery: 3 * tick, Clock: b.clk},
			session.Leader{
				OnStarted: func(_ context.Context, s *session.Session) { started <- s },
				OnStopped: func(err error) { stopped <- err },
			})
	}()
	first := <-started
	if err := b.auth.Release(b.ctx, first.Lease(), 0); err != nil { // lost: taken away behind its back
		t.Fatal(err)
	}
	if err := b.clk.Advance(3); err != nil { // the renewal is refused
		t.Fatal(err)
	}
	if err := await(b, stopped, 2, "OnStopped after the refused renewal at tick 3"); !errors.Is(err, session.ErrEnded) || !errors.Is(err, leases.ErrNotHolder) {
		t.Fatalf("OnStopped after the loss: %v; want ErrEnded, renewal refused", err)
	}
	second := <-started
	if second.Epoch() != 2 {
		t.Fatalf("leading again at epoch %d; want 2", second.Epoch())
	}
	stop()
	if err := <-stopped; !errors.Is(err, context.Canceled) {
		t.Fatalf("OnStopped when the context ended: %v", err)
	}
	if err := <-ended; !errors.Is(err, context.Canceled) {
		t.Fatalf("Lead returned %v; want context.Canceled", err)
	}
	if _, live, _ := b.auth.Lease(b.ctx, "r", 3); live {
		t.Fatal("the lease is still held after Lead returned")
	}
}

// flaky is a lessor whose first renewal fails without a refusal.
type flaky struct {
	leases.Lessor
	once sync.Once
}

func (l *flaky) Renew(ctx context.Context, held leases.Lease, ttl time.Duration) (leases.Lease, error) {
	var err error
	l.once.Do(func() { err = errors.New("connection refused") })
	if err != nil {
		return leases.Lease{}, err
	}
	return l.Lessor.Renew(ctx, held, ttl)
}

// Every grant, renewal, failed renewal and end reaches the hook in order
// and the log at the level an operator needs: a failing renewal is seen
// before the end.
func TestEventsAndLogs(t *testing.T) {
	b := newBench(t)
	var mu sync.Mutex
	var kinds []string
	var log bytes.Buffer
	s := b.start(&flaky{Lessor: b.lessor}, "A", session.Options{
		TTL: 10 * tick, Margin: 2 * tick, RenewEvery: 4 * tick,
		Logger: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug})),
		OnEvent: func(ev session.Event) {
			mu.Lock()
			defer mu.Unlock()
			kinds = append(kinds, ev.Kind.String())
			if ev.Resource != "r" || ev.Holder != "A" || ev.Epoch != 1 {
				t.Errorf("event %+v names the wrong lease", ev)
			}
			if (ev.Kind == session.RenewalFailed || ev.Kind == session.Ended) != (ev.Err != nil) {
				t.Errorf("event %v with error %v", ev.Kind, ev.Err)
			}
		},
	})
	b.settle(s, 4, 2) // fails
	b.settle(s, 5, 2) // renewed, after a backoff of a tick
	if err := s.Close(b.ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	got := strings.Join(kinds, ", ")
	mu.Unlock()
	if want := "granted, renewal failed, renewed, ended"; got != want {
		t.Fatalf("events: %s; want %s", got, want)
	}
	for _, want := range []string{
		`level=INFO msg="lease granted" resource=r holder=A epoch=1`,
		`level=WARN msg="lease renewal failed, retrying until the deadline" resource=r holder=A epoch=1`,
		`failure=transient error="session: renewal failed, to be retried before the deadline: connection refused"`,
		`level=DEBUG msg="lease renewed"`,
		`level=INFO msg="lease session closed"`,
		`reason=released error="session ended: closed"`,
		`level=INFO msg="lease released"`,
	} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, log.String())
		}
	}
}
