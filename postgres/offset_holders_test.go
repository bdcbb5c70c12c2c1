package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"leases"
	"leases/clock"
	"leases/postgres"
	"leases/session"
	"leases/testkit/fencetest"
)

// Two holders whose clocks disagree (one ahead by the offset, the other
// behind by it) take turns on one resource, each beginning to wait once
// the other was granted, and each holding until its
// session ends on its own clock with its renewals failing (a holder that
// stopped), so that the next is granted only when the lease runs out at
// the authority. On the server's clock their tenures never overlap,
// however far apart their clocks are: the server alone times the lease,
// and each session counts from when its request was sent. On the
// holders' own clocks (clock.Lessor), the behind holder's lease runs out,
// by the ahead holder's ticks, early: its tenure and the next overlap by
// about twice the offset less the margin.
func TestOffsetClocksOnTheServersClockNeverOverlap(t *testing.T) {
	const ttl, margin = 100 * time.Millisecond, 20 * time.Millisecond
	for _, c := range []struct {
		serverClock bool
		offset      time.Duration
	}{{true, 0}, {true, 50 * time.Millisecond}, {true, 2 * time.Second}, {false, 0}, {false, 25 * time.Millisecond}, {false, 50 * time.Millisecond}} {
		mode := "the holders' clocks"
		if c.serverClock {
			mode = "the server's clock"
		}
		t.Run(fmt.Sprintf("%s, offset ±%v", mode, c.offset), func(t *testing.T) {
			// Where the test must see an overlap (see below), a round
			// without one is run again, up to five rounds: a loaded
			// machine can make every grant of one round late.
			mustOverlap := !c.serverClock && 2*c.offset >= ttl
			for round := 1; ; round++ {
				tenures := takeTurns(t, c.serverClock, offsetClock(c.offset), session.Options{TTL: ttl, Margin: margin})
				overlaps, worst := 0, time.Duration(0)
				for i := 1; i < len(tenures); i++ {
					if over := tenures[i-1].ended.Sub(tenures[i].began); over > 0 {
						overlaps++
						worst = max(worst, over)
					}
				}
				t.Logf("round %d: %d tenures, %d overlapping the next, by up to %v", round, len(tenures), overlaps, worst.Round(time.Millisecond))
				switch {
				case c.serverClock && overlaps > 0:
					t.Fatalf("on the server's clock, %d tenures overlapped the next, by up to %v: %+v", overlaps, worst, tenures)
				case mustOverlap && overlaps == 0 && round < 5:
					continue
				case mustOverlap && overlaps == 0:
					// The ahead holder's clock has the behind holder's lease
					// run out already when it is granted: every turn from
					// behind to ahead overlaps by the behind holder's whole
					// tenure (80 ms) less the latency of one grant. Between a
					// margin and a TTL (±25 ms) the window is twice the offset
					// less the margin, 30 ms, which a loaded machine's grant
					// can outlast: there the overlap is a figure, not a check.
					t.Fatalf("on the holders' clocks %v apart no tenure overlapped in %d rounds: the test cannot see an overlap", 2*c.offset, round)
				}
				return
			}
		})
	}
}

// takeTurns has two holders, one whose clock is ahead by offset and one
// behind by it, take three turns each on one resource of new tables,
// the behind one first, and returns their tenures in the order they
// began. On the server's clock they use the store's lessor; otherwise
// each its own clock through clock.Lessor.
func takeTurns(t *testing.T, serverClock bool, offset offsetClock, opts session.Options) []tenure {
	// A holder that fails ends the other's wait for its turn.
	ctx, fail := context.WithCancelCause(fencetest.Context(t))
	defer fail(nil)
	store := newStore(t, database(t, 0).DB, postgres.Options{WatchInterval: time.Millisecond})
	var mu sync.Mutex
	var tenures []tenure
	var wg sync.WaitGroup
	// Each waits for its turn: the other's grant. The behind holder goes
	// first.
	turns := [2]chan struct{}{make(chan struct{}, 1), make(chan struct{}, 1)}
	turns[1] <- struct{}{}
	var tenureEpochs sync.Map // of the grants the holders took as tenures
	for i, name := range []string{"ahead", "behind"} {
		clk := offset
		if i == 1 {
			clk = -clk
		}
		side := sameStore(t, store, database(t, 0).DB, postgres.Options{WatchInterval: time.Millisecond})
		var lessor leases.Lessor = side.Lessor()
		if !serverClock {
			lessor = clock.Lessor(side.Authority(), clk)
		}
		lessor = stopped{lessor, &tenureEpochs}
		opts := opts
		opts.Clock = clk
		wg.Go(func() {
			for range 3 {
				select {
				case <-turns[i]:
				case <-ctx.Done():
					return
				}
				s, err := waitForTurn(ctx, t, lessor, name, opts)
				if err != nil {
					t.Error(err)
					fail(err)
					return
				}
				tenureEpochs.Store(s.Epoch(), true)
				turns[1-i] <- struct{}{}
				began := time.Now()
				<-s.Done()
				// The holder believes in the lease until its deadline (on
				// its own clock, so less its offset) at the latest: a
				// loaded machine that runs this goroutine late must not
				// look like an overlap.
				ended := time.Now()
				if deadline := s.Deadline().Add(-time.Duration(clk)); deadline.Before(ended) {
					ended = deadline
				}
				mu.Lock()
				tenures = append(tenures, tenure{name, s.Epoch(), began, ended})
				mu.Unlock()
				_ = s.Close(ctx) // fails: the lease runs out at the authority
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	slices.SortFunc(tenures, func(a, b tenure) int { return a.began.Compare(b.began) })
	return tenures
}

// waitForTurn is session.Wait, again after a grant that came too late for
// its session (past the deadline it would have had: 80 ms of window, which
// a loaded machine's grant can outlast), a few times: the test measures
// the tenures' overlap, not how fast a grant comes.
func waitForTurn(ctx context.Context, t *testing.T, lessor leases.Lessor, name string, opts session.Options) (*session.Session, error) {
	for attempt := 1; ; attempt++ {
		s, err := session.Wait(ctx, lessor, "r", name, opts)
		if err == nil || attempt == 5 || ctx.Err() != nil {
			return s, err
		}
		t.Logf("%s: attempt %d: %v; waiting again", name, attempt, err)
	}
}

// tenure is one holder's time with the lease, by the test's clock: from
// its grant to its session's end.
type tenure struct {
	holder       string
	epoch        int64
	began, ended time.Time
}

// offsetClock is the wall clock offset by a duration: a machine whose
// clock is ahead (positive) or behind.
type offsetClock time.Duration

func (o offsetClock) Now() int64 { return clock.Wall{}.Now() + time.Duration(o).Milliseconds() }

func (o offsetClock) Wait(ctx context.Context, tick int64) error {
	return clock.Wall{}.Wait(ctx, tick-time.Duration(o).Milliseconds())
}

// stopped is a lessor whose holder has stopped renewing, and releasing
// its tenures (the grants in tenures): their leases run out at the
// authority. A grant that Wait itself releases, one that came after the
// deadline its session would have had on a loaded machine, is released:
// Wait never drops a grant it could not release, and would wait for
// ever for a release that cannot succeed.
type stopped struct {
	leases.Lessor
	tenures *sync.Map // epoch: true
}

var errStopped = errors.New("the holder stopped")

func (stopped) Renew(context.Context, leases.Lease, time.Duration) (leases.Lease, error) {
	return leases.Lease{}, errStopped
}

func (s stopped) Release(ctx context.Context, held leases.Lease) error {
	if _, tenure := s.tenures.Load(held.Epoch); tenure {
		return errStopped
	}
	return s.Lessor.Release(ctx, held)
}

func (s stopped) Changed(ctx context.Context, resource string) (<-chan struct{}, error) {
	return s.Lessor.Changed(ctx, resource)
}
