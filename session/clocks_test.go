package session_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"leases"
	"leases/clock"
	"leases/session"
	"leases/sqlite"
	"leases/testkit/testctx"
)

// offset is a machine's clock that is offset from true time (base) by a
// fixed number of milliseconds, and runs at rate times its speed: a clock
// that was set wrong, or that runs fast.
type offset struct {
	base   *clock.Manual
	origin int64   // where the rate counts from
	by     int64   // the offset, in milliseconds
	rate   float64 // 1 for an accurate clock
}

func (c offset) Now() int64 {
	return c.origin + c.by + int64(math.Floor(float64(c.base.Now()-c.origin)*c.rate))
}

func (c offset) Wait(ctx context.Context, tick int64) error {
	return c.base.Wait(ctx, c.origin+int64(math.Ceil(float64(tick-c.by-c.origin)/c.rate)))
}

// cutOff is a lessor whose renewals fail, as they do for a holder cut off
// from the authority: its session lasts until its deadline.
type cutOff struct{ leases.Lessor }

func (cutOff) Renew(context.Context, leases.Lease, time.Duration) (leases.Lease, error) {
	return leases.Lease{}, errors.New("cut off from the authority")
}

// overlapRound is one round of the clock test: holder A, on an accurate
// clock, acquires and is then cut off; holder B, on a clock offset by
// offsetB, tries to acquire every step of true time. It returns how long,
// in true time, A still believed it held the lease (its session had not
// ended) after B was granted.
func overlapRound(t *testing.T, authorityTime bool, offsetB time.Duration, opts session.Options) time.Duration {
	t.Helper()
	ctx := testctx.Context(t)
	const origin, step = 1_000_000, 10
	truth := clock.NewManual(origin)
	store, err := sqlite.Options{Clock: truth}.Open(ctx, filepath.Join(t.TempDir(), "leases.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	lessorOn := func(clk clock.Clock) leases.Lessor {
		if authorityTime {
			return store.Lessor()
		}
		return clock.Lessor(store.Authority(), clk)
	}
	clockA := offset{base: truth, origin: origin, rate: 1}
	clockB := offset{base: truth, origin: origin, by: offsetB.Milliseconds(), rate: 1}
	opts.Clock = clockA
	a, err := session.Start(ctx, cutOff{lessorOn(clockA)}, "r", "A", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(ctx)
	b := lessorOn(clockB)
	for now := int64(origin); now < origin+3*opts.TTL.Milliseconds()+offsetB.Abs().Milliseconds(); now += step {
		if err := truth.Advance(now); err != nil {
			t.Fatal(err)
		}
		lease, err := b.Acquire(ctx, "r", "B", opts.TTL)
		if err != nil && !leases.IsRefusal(err) {
			t.Fatal(err)
		}
		if err != nil {
			continue
		}
		// B is granted at true time now: how much longer does A believe?
		granted := now
		for ; a.Check() == nil; now += step {
			if err := truth.Advance(now + step); err != nil {
				t.Fatal(err)
			}
		}
		_ = lease
		return time.Duration(now-granted) * time.Millisecond
	}
	t.Fatalf("B was never granted (offset %v)", offsetB)
	return 0
}

// Holders whose clocks are offset from each other by seconds never overlap
// when the authority decides on its own clock (the SQLite file's host
// clock here; a PostgreSQL server's or etcd's elsewhere), since each
// holder counts its lease on its own clock from when it sent the request.
// On callers' clocks, they overlap as soon as the offset exceeds the
// margin, by the offset less the margin: the figures are in
// docs/service.md ("Whose clock decides").
func TestOffsetClocksOverlapOnlyOnCallersTicks(t *testing.T) {
	opts := session.Options{TTL: 10 * time.Second, Margin: 2 * time.Second, RenewEvery: 7 * time.Second}
	var table strings.Builder
	fmt.Fprintf(&table, "\n| B's clock against A's | overlap on callers' ticks | overlap on the authority's time |\n|---:|---:|---:|\n")
	for _, by := range []time.Duration{-5 * time.Second, -2 * time.Second, -time.Second, 0,
		time.Second, 2 * time.Second, 3 * time.Second, 5 * time.Second, 10 * time.Second} {
		callers := overlapRound(t, false, by, opts)
		authority := overlapRound(t, true, by, opts)
		if authority != 0 {
			t.Errorf("offset %v: on the authority's time A and B overlapped for %v; want never", by, authority)
		}
		// A's deadline is 10 s - 2 s - 10 ms (drift) after its grant; B
		// is granted when its clock reads the expiry, 10 s - by after.
		if want := max(0, by-2*time.Second-10*time.Millisecond); callers < want || callers > want+10*time.Millisecond {
			t.Errorf("offset %v: on callers' ticks A and B overlapped for %v; want %v (to a step)", by, callers, want)
		}
		fmt.Fprintf(&table, "| %v | %v | %v |\n", by, callers, authority)
	}
	t.Logf("TTL %v, margin %v, a step of 10ms:%s", opts.TTL, opts.Margin, table.String())
}

// A session ends early enough for an authority whose clock runs fast, by
// the drift allowance: with the authority's clock 0.1% fast, a holder
// with the default allowance stops before the authority grants the lease
// to someone else; with next to no allowance, it does not.
func TestDriftAllowanceCoversAFastAuthorityClock(t *testing.T) {
	for _, tc := range []struct {
		drift   float64
		overlap bool
	}{{session.DefaultDrift, false}, {1e-9, true}} {
		t.Run(fmt.Sprintf("drift %v", tc.drift), func(t *testing.T) {
			ctx := testctx.Context(t)
			const origin = 1_000_000
			truth := clock.NewManual(origin)
			fast := offset{base: truth, origin: origin, rate: 1.001}
			store, err := sqlite.Options{Clock: fast}.Open(ctx, filepath.Join(t.TempDir(), "leases.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			holder := offset{base: truth, origin: origin, rate: 1}
			a, err := session.Start(ctx, cutOff{store.Lessor()}, "r", "A",
				session.Options{TTL: 10 * time.Second, Margin: time.Millisecond, Drift: tc.drift, RenewEvery: 9 * time.Second, Clock: holder})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close(ctx)
			overlapped := false
			for now := int64(origin); a.Check() == nil; now++ {
				if err := truth.Advance(now); err != nil {
					t.Fatal(err)
				}
				if a.Check() != nil {
					break
				}
				if _, live, err := store.Lessor().Lease(ctx, "r"); err != nil || !live {
					overlapped = true // the authority could grant it while A still believes
					break
				}
			}
			if overlapped != tc.overlap {
				t.Fatalf("the authority's lease ran out while A believed it held it: %v; want %v", overlapped, tc.overlap)
			}
		})
	}
}
