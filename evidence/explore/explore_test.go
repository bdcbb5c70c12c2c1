package explore

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"leases"
)

// The figures results.json reports at the default bounds: the claims each
// protocol makes hold in every schedule, and the weaknesses each has show up.
func TestExploreFindsWhatEachProtocolPromises(t *testing.T) {
	ex, _, err := Explore(context.Background(), sqlite, DefaultBounds)
	if err != nil {
		t.Fatal(err)
	}
	byProtocol := map[Protocol]ProtocolFigures{}
	for _, p := range ex.Protocols {
		byProtocol[p.Protocol] = p
		if p.Schedules == 0 {
			t.Fatalf("%s: no schedules explored", p.Protocol)
		}
		if len(p.Counterexamples) != countNonZero(p) {
			t.Errorf("%s: %d counterexamples for %d non-zero counts", p.Protocol, len(p.Counterexamples), countNonZero(p))
		}
	}
	unfenced, fenced, fba, guarded := byProtocol[Unfenced], byProtocol[Fenced], byProtocol[FenceBeforeActingProtocol], byProtocol[GuardedProtocol]
	if txFence := byProtocol[TxFenceProtocol]; !reflect.DeepEqual(withoutName(txFence), withoutName(fenced)) {
		t.Errorf("the in-transaction fence found %+v; want the built-in fenced receiver's figures %+v", txFence, fenced)
	}
	if txGuarded := byProtocol[TxGuardedProtocol]; !reflect.DeepEqual(withoutName(txGuarded), withoutName(guarded)) {
		t.Errorf("the guarded write in the user's transaction found %+v; want the guarded receiver's figures %+v", txGuarded, guarded)
	}
	if unfenced.LostUpdates == 0 || unfenced.Violations.I5 == 0 {
		t.Errorf("unfenced: %+v; want lost updates and I5 violations", unfenced)
	}
	for _, p := range []ProtocolFigures{fenced, fba, guarded} {
		if p.Violations != (Violations{}) || p.LostUpdates != 0 {
			t.Errorf("%s: violations %+v, lost updates %d; want none", p.Protocol, p.Violations, p.LostUpdates)
		}
	}
	if fenced.Gaps == 0 {
		t.Error("fenced: no gap schedules; C7 says a stale write is accepted until the receiver sees the newer epoch")
	}
	if guarded.Schedules != fenced.Schedules || guarded.Gaps != 0 {
		t.Errorf("guarded: %d schedules, %d gaps; want fenced's %d schedules and no gap", guarded.Schedules, guarded.Gaps, fenced.Schedules)
	}
	if fba.StaleAfterRead == nil || *fba.StaleAfterRead != 0 {
		t.Errorf("fence-before-acting: stale writes after the new holder's read %v, want 0", fba.StaleAfterRead)
	}
}

// withoutName is p with its protocol's name blanked, so that two protocols'
// figures and counterexamples compare.
func withoutName(p ProtocolFigures) ProtocolFigures {
	p.Protocol = ""
	return p
}

func countNonZero(p ProtocolFigures) int {
	n := 0
	for _, c := range []int64{p.Violations.I1, p.Violations.I2, p.Violations.I3, p.Violations.I4, p.Violations.I5, p.LostUpdates, p.Gaps} {
		if c > 0 {
			n++
		}
	}
	if p.StaleAfterRead != nil && *p.StaleAfterRead > 0 {
		n++
	}
	return n
}

// The memo and the restores lose nothing: on small bounds, replaying every
// schedule from an empty database, one by one, gives the same counts and
// the same shortest counterexamples. The counts are written down too, and
// both must match them: without faults, unfenced breaks I3 and I5 and loses
// updates, and every protocol but the guarded one has gaps. The schedule counts but 56 are
// derived in TestExploreScheduleCountsAtEdgeBounds.
func TestExploreCountsEverySchedule(t *testing.T) {
	small, three := Bounds{Workers: 2, TTL: 1, LastTick: 2}, Bounds{Workers: 3, TTL: 1, LastTick: 1}
	cases := []struct {
		bounds   Bounds
		protocol Protocol
		want     figuresWanted
	}{
		{small, Unfenced, figuresWanted{schedules: 56, violations: Violations{I3: 10, I5: 10}, lost: 10, gaps: 10}},
		{small, Fenced, figuresWanted{schedules: 56, gaps: 10}},
		{three, Unfenced, figuresWanted{schedules: 132, violations: Violations{I3: 24, I5: 24}, lost: 24, gaps: 24}},
		{three, Fenced, figuresWanted{schedules: 132, gaps: 24}},
		{small, TxFenceProtocol, figuresWanted{schedules: 56, gaps: 10}},
		// The guarded receiver closes the gap: no stale write is ever
		// accepted, before or after the receiver sees the newer epoch.
		{small, GuardedProtocol, figuresWanted{schedules: 56}},
		{three, GuardedProtocol, figuresWanted{schedules: 132}},
		// Four steps a worker make many more schedules to replay one by one.
		{Bounds{Workers: 2, TTL: 1, LastTick: 1}, FenceBeforeActingProtocol, figuresWanted{schedules: 126, gaps: 12}},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s %+v", tc.protocol, tc.bounds), func(t *testing.T) {
			ctx := context.Background()
			x, done, err := newExplorer(ctx, sqlite, tc.bounds, tc.protocol, faults{})
			if err != nil {
				t.Fatal(err)
			}
			defer done()
			memoised, err := x.visit(ctx, modelState{})
			if err != nil {
				t.Fatal(err)
			}
			naive := bruteForce(t, tc.bounds, tc.protocol, faults{})
			if memoised.schedules != naive.schedules || memoised.count != naive.count {
				t.Fatalf("memoised: %d schedules, counts %v; one by one: %d, %v",
					memoised.schedules, memoised.count, naive.schedules, naive.count)
			}
			if naive.schedules != tc.want.schedules || naive.count != tc.want.byProperty() {
				t.Fatalf("%d schedules, counts %v; want %d, %v", naive.schedules, naive.count, tc.want.schedules, tc.want.byProperty())
			}
			for prop := range numProperties {
				if got := actionsOf(memoised.best[prop]); !slices.Equal(got, naive.best[prop]) {
					t.Errorf("%s: shortest counterexample %v, one by one %v", propertyNames[prop], got, naive.best[prop])
				}
			}
		})
	}
}

// figuresWanted are a protocol's exact figures on small bounds.
type figuresWanted struct {
	schedules  int64
	violations Violations
	lost, gaps int64
	afterRead  int64 // fence-before-acting only
}

// byProperty lays the wanted figures out as the explorer's properties, in
// the order of propertyNames, to compare with what bruteForce counts.
func (w figuresWanted) byProperty() [numProperties]int64 {
	v := w.violations
	return [numProperties]int64{v.I1, v.I2, v.I3, v.I4, v.I5, w.lost, w.gaps, w.afterRead}
}

// naiveTally is what bruteForce finds.
type naiveTally struct {
	schedules int64
	count     [numProperties]int64
	best      [numProperties][]int8
}

// bruteForce enumerates every schedule, rebuilding every prefix from an
// empty database: no memo, no intermediate snapshots.
func bruteForce(t *testing.T, bounds Bounds, p Protocol, f faults) naiveTally {
	t.Helper()
	ctx := context.Background()
	x, done, err := newExplorer(ctx, sqlite, bounds, p, f)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	empty, err := x.store.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var result naiveTally
	var walk func(prefix []int8)
	walk = func(prefix []int8) {
		if err := x.store.Restore(ctx, empty); err != nil {
			t.Fatal(err)
		}
		var s modelState
		for _, action := range prefix {
			if s, _, err = x.step(ctx, s, action); err != nil {
				t.Fatal(err)
			}
		}
		actions := x.enabled(&s, nil)
		if len(actions) == 0 {
			result.schedules++
			for prop, seen := range s.seen {
				if !seen {
					continue
				}
				result.count[prop]++
				if best := result.best[prop]; best == nil || len(prefix) < len(best) ||
					len(prefix) == len(best) && slices.Compare(prefix, best) < 0 {
					result.best[prop] = slices.Clone(prefix)
				}
			}
			return
		}
		for _, action := range actions {
			walk(append(slices.Clone(prefix), action))
		}
	}
	walk(nil)
	return result
}

func actionsOf(s *suffix) []int8 {
	if s == nil {
		return nil
	}
	actions := []int8{}
	for ; s != endOfSchedule; s = s.next {
		actions = append(actions, s.action)
	}
	return actions
}

func TestExploreRejectsBadBounds(t *testing.T) {
	for _, b := range []Bounds{
		{Workers: 0, TTL: 2, LastTick: 4},
		{Workers: maxWorkers + 1, TTL: 2, LastTick: 4},
		{Workers: 3, TTL: 0, LastTick: 4},
		{Workers: 3, TTL: 2, LastTick: -1},
	} {
		if _, _, err := Explore(context.Background(), sqlite, b); !errors.Is(err, leases.ErrInvalidInput) {
			t.Errorf("bounds %+v: %v, want ErrInvalidInput", b, err)
		}
	}
	// The edges themselves are bounds, explored in
	// TestExploreScheduleCountsAtEdgeBounds.
	for _, b := range []Bounds{
		{Workers: 1, TTL: 1, LastTick: 0},
		{Workers: maxWorkers, TTL: 1, LastTick: 0},
	} {
		if err := b.Check(); err != nil {
			t.Errorf("bounds %+v: %v, want them accepted", b, err)
		}
	}
}

// An exploration whose context has ended returns no figures and says why:
// half an exploration is not evidence.
func TestExploreEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ex, _, err := Explore(ctx, sqlite, Bounds{Workers: 2, TTL: 2, LastTick: 2})
	if !errors.Is(err, context.Canceled) || ex != nil {
		t.Fatalf("Explore after cancel: %+v, %v; want no exploration and context.Canceled", ex, err)
	}
}
