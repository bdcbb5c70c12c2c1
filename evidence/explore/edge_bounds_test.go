package explore

import (
	"context"
	"fmt"
	"testing"
)

// The explorer at the edges of its bounds: one worker, the most workers,
// the shortest lease, a clock that never ticks. The schedule counts are
// derived below, not read off the explorer. k is a worker's number of
// steps when it is never refused nor superseded: 2 (acquire, write), or 4
// with fence before acting (acquire, observe, read, write); W is workers,
// L the last tick.
//
//   - One worker is never refused nor superseded: its k steps interleave
//     with the L ticks, C(k+L, k) ways: 15 for k 2 and L 4, 70 for k 4.
//   - Last tick 0: the first acquire is granted (W choices) and every other
//     is refused, the lease living until tick ttl >= 1; the grantee's k-1
//     further steps interleave with the W-1 refusals:
//     W·(W+k-2)!/(k-1)!, so 18 and 96 for k 2 and W 3 and 4, 60 and 480 for k 4.
//   - TTL 1 and last tick 1, k 2: the tick T ends the first lease, so the
//     first acquire before T is granted (g1), and so is the first after T
//     (g2); all others are refused. With a of the W acquires before T and
//     b = W-a after: a = 0 is last tick 0's W·W!; otherwise C(W,a)·a·
//     (a!·P(b) + (a-1)!·P'(b)), where g1's write is before T (a!) or after
//     it ((a-1)!), and after T P(b) = b·b! arrangements with g2's acquire
//     first, or P'(b) = P(b)·(b+2) with g1's write in one of b+2 slots; P(0)
//     = P'(0) = 1. W 3: 18+60+30+24 = 132; W 4: 96+432+288+144+120 = 1080.
//   - TTL 1 and last tick 1, k 4, W 2: T first, then last tick 0's 8; both
//     acquires before T: g1 (2) and the 5!/(2!·3!) = 10 orders of the
//     refusal before T and g1's three steps: 20; one acquire before T: g1
//     (2) times the merges of its three steps into the other's T, acquire,
//     observe, read, write: 56 in all, less the 10 with g1's observe after
//     the other's, where instead g1's observe is stale and ends it, in 3
//     slots: 2·(46+3) = 98. 8+20+98 = 126 (bruteForce agrees, in
//     TestExploreCountsEverySchedule).
//
// Four workers with fence before acting at the default ttl and last tick is
// 10,811,232 schedules, seconds to explore: too slow here, so that edge is
// taken with the clock stopped.
func TestExploreScheduleCountsAtEdgeBounds(t *testing.T) {
	cases := []struct {
		protocols []Protocol
		bounds    Bounds
		schedules int64
	}{
		{[]Protocol{Unfenced, Fenced, GuardedProtocol, TxFenceProtocol, TxGuardedProtocol}, Bounds{Workers: 1, TTL: 1, LastTick: 0}, 1},
		{[]Protocol{FenceBeforeActingProtocol}, Bounds{Workers: 1, TTL: 1, LastTick: 0}, 1},
		{[]Protocol{Unfenced, Fenced, GuardedProtocol, TxFenceProtocol, TxGuardedProtocol}, Bounds{Workers: 1, TTL: 2, LastTick: 4}, 15},
		{[]Protocol{FenceBeforeActingProtocol}, Bounds{Workers: 1, TTL: 2, LastTick: 4}, 70},
		{[]Protocol{Unfenced, Fenced, GuardedProtocol, TxFenceProtocol, TxGuardedProtocol}, Bounds{Workers: 3, TTL: 2, LastTick: 0}, 18},
		{[]Protocol{FenceBeforeActingProtocol}, Bounds{Workers: 3, TTL: 2, LastTick: 0}, 60},
		{[]Protocol{Unfenced, Fenced, GuardedProtocol, TxFenceProtocol, TxGuardedProtocol}, Bounds{Workers: 4, TTL: 2, LastTick: 0}, 96},
		{[]Protocol{FenceBeforeActingProtocol}, Bounds{Workers: 4, TTL: 2, LastTick: 0}, 480},
		{[]Protocol{Unfenced, Fenced, GuardedProtocol, TxFenceProtocol, TxGuardedProtocol}, Bounds{Workers: 3, TTL: 1, LastTick: 1}, 132},
		{[]Protocol{Unfenced, Fenced, GuardedProtocol, TxFenceProtocol, TxGuardedProtocol}, Bounds{Workers: 4, TTL: 1, LastTick: 1}, 1080},
		{[]Protocol{FenceBeforeActingProtocol}, Bounds{Workers: 2, TTL: 1, LastTick: 1}, 126},
	}
	for _, tc := range cases {
		for _, p := range tc.protocols {
			t.Run(fmt.Sprintf("%s %+v", p, tc.bounds), func(t *testing.T) {
				t.Parallel()
				figures, _, err := exploreProtocol(context.Background(), sqlite, tc.bounds, p, faults{})
				if err != nil {
					t.Fatal(err)
				}
				if figures.Schedules != tc.schedules {
					t.Errorf("%d schedules, want %d", figures.Schedules, tc.schedules)
				}
				// One worker, or a clock that never ticks, means one lease
				// and nothing stale: every count is zero. And the fenced
				// protocols keep their promises at every edge.
				oneLease := tc.bounds.Workers == 1 || tc.bounds.LastTick == 0
				if (oneLease || p != Unfenced) && (figures.Violations != Violations{} || figures.LostUpdates != 0) {
					t.Errorf("violations %+v, lost updates %d; want none", figures.Violations, figures.LostUpdates)
				}
				if oneLease && figures.Gaps != 0 {
					t.Errorf("%d gaps with one lease", figures.Gaps)
				}
				if p == FenceBeforeActingProtocol && (figures.StaleAfterRead == nil || *figures.StaleAfterRead != 0) {
					t.Errorf("stale after the new holder's read %v, want 0", figures.StaleAfterRead)
				}
			})
		}
	}
}
