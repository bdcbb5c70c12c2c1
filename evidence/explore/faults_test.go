package explore

import (
	"context"
	"testing"
)

// Every check of the explorer can fail: with a part broken on purpose,
// each count goes from zero to an exact figure, and every other count stays
// where it was. The figures are bruteForce's, which replays every schedule
// from an empty database; the explorer must match them and hard-coded
// figures both. Without faults, on the same bounds, fenced and fence
// before acting have gaps and nothing else, and unfenced, itself the
// receiver that breaks I3, I5 and lost updates, has those too: see
// TestExploreCountsEverySchedule. The broken observes never answer stale,
// so no worker stops early: 140 schedules, not 126, the count derived in
// TestExploreScheduleCountsAtEdgeBounds less the 2·(10-3) schedules in
// which a stale observe cuts the old holder's three steps short.
func TestExploreCatchesEachBrokenPart(t *testing.T) {
	early := func(a acquirer) acquirer { return earlyAuthority{a} }
	firstEpoch := func(a acquirer) acquirer { return firstEpochAuthority{a} }
	small := Bounds{Workers: 2, TTL: 1, LastTick: 2}
	smallFBA := Bounds{Workers: 2, TTL: 1, LastTick: 1} // four steps a worker: fewer ticks keep bruteForce quick
	cases := []struct {
		name     string
		protocol Protocol
		bounds   Bounds
		faults   faults
		want     figuresWanted
	}{
		{"I1: an authority that grants a tick early", Fenced, small, faults{authority: early},
			figuresWanted{schedules: 56, violations: Violations{I1: 28}, gaps: 10}},
		// The fenced receiver rejects the second value at epoch 1 as a
		// conflict, so I4 holds although every epoch is 1.
		{"I2: an authority that grants epoch 1 every time", Fenced, small, faults{authority: firstEpoch},
			figuresWanted{schedules: 56, violations: Violations{I2: 38}}},
		{"I4: and a receiver that stores a second value at one epoch", Fenced, small,
			faults{authority: firstEpoch, receiver: newConflictStoringReceiver},
			figuresWanted{schedules: 56, violations: Violations{I2: 38, I4: 38}}},
		{"I3 on observe: a receiver whose observe, superseded, lowers the fence", FenceBeforeActingProtocol, smallFBA,
			faults{receiver: newFenceLoweringObserveReceiver},
			figuresWanted{schedules: 140, violations: Violations{I3: 20}, gaps: 12}},
		{"I5, stale after read: a receiver whose observe records nothing", FenceBeforeActingProtocol, smallFBA,
			faults{receiver: newForgetfulObserveReceiver},
			figuresWanted{schedules: 140, violations: Violations{I5: 50}, gaps: 12, afterRead: 30}},
		// Without its look at the lease, the guarded receiver is a fenced
		// one: the fenced protocol's gaps come back.
		{"gaps: a guarded receiver that does not look at the lease", GuardedProtocol, small,
			faults{guarded: newBlindGuardedReceiver},
			figuresWanted{schedules: 56, gaps: 10}},
		{"gaps: the guarded write in the user's transaction without its lease check", TxGuardedProtocol, small,
			faults{guarded: newBlindTxGuard},
			figuresWanted{schedules: 56, gaps: 10}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			figures, _, err := exploreProtocol(context.Background(), sqlite, tc.bounds, tc.protocol, tc.faults)
			if err != nil {
				t.Fatal(err)
			}
			got := figuresWanted{schedules: figures.Schedules, violations: figures.Violations, lost: figures.LostUpdates, gaps: figures.Gaps}
			if (figures.StaleAfterRead != nil) != (tc.protocol == FenceBeforeActingProtocol) {
				t.Fatalf("stale after read %v for %s", figures.StaleAfterRead, tc.protocol)
			}
			if figures.StaleAfterRead != nil {
				got.afterRead = *figures.StaleAfterRead
			}
			if got != tc.want {
				t.Errorf("explored:\n got %+v\nwant %+v", got, tc.want)
			}
			if len(figures.Counterexamples) != countNonZero(figures) {
				t.Errorf("%d counterexamples for %d non-zero counts", len(figures.Counterexamples), countNonZero(figures))
			}
			naive := bruteForce(t, tc.bounds, tc.protocol, tc.faults)
			if naive.schedules != tc.want.schedules || naive.count != tc.want.byProperty() {
				t.Errorf("one by one: %d schedules, counts %v; want %d, %v",
					naive.schedules, naive.count, tc.want.schedules, tc.want.byProperty())
			}
		})
	}
}
