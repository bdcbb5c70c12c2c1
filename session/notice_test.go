package session_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"leases"
	"leases/session"
)

// pausedBeforeSend is the bench's clock for a holder that pauses between
// its renewal's last look at the clock and the sending: once armed with
// n, the n-th reading from then on is one tick later than the clock
// (the earlier ones are the clock's), while the clock itself, and every
// timer on it, stays where it is.
type pausedBeforeSend struct {
	*spinClock
	readings atomic.Int32
}

func (c *pausedBeforeSend) Now() int64 {
	now := c.spinClock.Now()
	if c.readings.Load() > 0 && c.readings.Add(-1) == 0 {
		return now + 1
	}
	return now
}

// A renewal sent exactly at the deadline does not extend the session,
// even when it is granted: the holder may have stopped believing in the
// lease at that tick. Here the renewal due a tick before the deadline
// looks at the clock then, and is sent at the deadline; the session
// keeps its deadline and its lease as granted, and ends at the deadline.
func TestARenewalSentAtTheDeadlineDoesNotExtendTheSession(t *testing.T) {
	b := newBench(t)
	clk := &pausedBeforeSend{spinClock: b.clk}
	s := b.start(nil, "A", session.Options{TTL: 10 * tick, Margin: 2 * tick, RenewEvery: 7 * tick, Clock: clk})
	if deadlineTick(s) != 8 {
		t.Fatalf("deadline %d; want 8", deadlineTick(s))
	}
	clk.readings.Store(2) // the renewal's Check reads 7, its sending 8
	if b.settle(s, 7, 2) {
		t.Fatalf("ended at tick 7: %v", s.Err())
	}
	if got := s.Lease(); got.ExpiresAt != 10 || deadlineTick(s) != 8 {
		t.Fatalf("after a renewal sent at the deadline: lease %+v, deadline %d; want the lease as granted (expiry 10), deadline 8", got, deadlineTick(s))
	}
	if !b.settle(s, 8, 2) {
		t.Fatalf("still live at its deadline, lease %+v, deadline %d", s.Lease(), deadlineTick(s))
	}
}

// Another caller whose clock is ahead of the holder's by exactly the
// margin (and no drift allowance) is granted the lease at the very tick
// the holder's session ends, never while it still believes; a tick more
// and they overlap by a tick (by a step here), the figure
// TestOffsetClocksOverlapOnlyOnCallersTicks shows for larger offsets.
func TestAnotherCallersClockAheadByExactlyTheMargin(t *testing.T) {
	opts := session.Options{TTL: 10 * time.Second, Margin: 2 * time.Second, Drift: 1e-9, RenewEvery: 7 * time.Second}
	const step = 10 * time.Millisecond // overlapRound's
	if overlap := overlapRound(t, false, opts.Margin, opts); overlap != 0 {
		t.Errorf("B's clock ahead by the margin: A and B overlapped for %v; want never", overlap)
	}
	if overlap := overlapRound(t, false, opts.Margin+step, opts); overlap != step {
		t.Errorf("B's clock ahead by the margin and a step: A and B overlapped for %v; want %v", overlap, step)
	}
}

// Options that make no sense are refused by Wait and by Do as by Start:
// an error matching ErrInvalidInput, in one line, before anything is
// sent; never a panic, nor a wait.
func TestWaitAndDoRefuseBadOptions(t *testing.T) {
	for name, opts := range map[string]session.Options{
		"negative TTL":          {TTL: -time.Second},
		"margin at the TTL":     {TTL: time.Second, Margin: time.Second},
		"drift of a half":       {TTL: time.Second, Drift: 0.5},
		"renewal at the limit":  {TTL: time.Second, Margin: 200 * tick, RenewEvery: 799 * tick},
		"negative renewal":      {TTL: time.Second, RenewEvery: -tick},
		"negative close bound":  {TTL: time.Second, CloseTimeout: -1},
		"a TTL meant as second": {TTL: 10},
	} {
		t.Run(name, func(t *testing.T) {
			b := newBench(t)
			opts.Clock = b.clk
			s, waitErr := session.Wait(b.ctx, b.lessor, "r", "A", opts)
			if s != nil {
				_ = s.Close(b.ctx)
			}
			ran := false
			doErr := session.Do(b.ctx, b.lessor, "r", "A", opts, func(context.Context, *session.Session) error {
				ran = true
				return nil
			})
			for call, err := range map[string]error{"Wait": waitErr, "Do": doErr} {
				if !errors.Is(err, leases.ErrInvalidInput) || strings.Contains(err.Error(), "\n") {
					t.Errorf("%s: %v; want one line matching ErrInvalidInput", call, err)
				}
			}
			if ran {
				t.Error("Do ran its function")
			}
			if _, live, _ := b.auth.Lease(b.ctx, "r", 0); live {
				t.Fatal("the lease was acquired anyway")
			}
		})
	}
}
