package experiment

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"leases"
)

// The figures results.json reports at the default bounds: the claims each
// protocol makes hold in every schedule, and the weaknesses each has show up.
func TestExploreFindsWhatEachProtocolPromises(t *testing.T) {
	ex, _, err := Explore(context.Background(), DefaultBounds)
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
	unfenced, fenced, fba := byProtocol[Unfenced], byProtocol[Fenced], byProtocol[FenceBeforeActingProtocol]
	if unfenced.LostUpdates == 0 || unfenced.Violations.I5 == 0 {
		t.Errorf("unfenced: %+v; want lost updates and I5 violations", unfenced)
	}
	for _, p := range []ProtocolFigures{fenced, fba} {
		if p.Violations != (Violations{}) || p.LostUpdates != 0 {
			t.Errorf("%s: violations %+v, lost updates %d; want none", p.Protocol, p.Violations, p.LostUpdates)
		}
	}
	if fenced.Gaps == 0 {
		t.Error("fenced: no gap schedules; C7 says a stale write is accepted until the receiver sees the newer epoch")
	}
	if fba.StaleAfterRead == nil || *fba.StaleAfterRead != 0 {
		t.Errorf("fence-before-acting: stale writes after the new holder's read %v, want 0", fba.StaleAfterRead)
	}
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
// the same shortest counterexamples.
func TestExploreCountsEverySchedule(t *testing.T) {
	cases := []struct {
		bounds    Bounds
		protocols []Protocol
	}{
		{Bounds{Workers: 2, TTL: 1, LastTick: 2}, []Protocol{Unfenced, Fenced}},
		{Bounds{Workers: 3, TTL: 1, LastTick: 1}, []Protocol{Unfenced, Fenced}},
		// Four steps a worker make many more schedules to replay one by one.
		{Bounds{Workers: 2, TTL: 1, LastTick: 1}, []Protocol{FenceBeforeActingProtocol}},
	}
	for _, tc := range cases {
		bounds := tc.bounds
		for _, p := range tc.protocols {
			t.Run(fmt.Sprintf("%s %+v", p, bounds), func(t *testing.T) {
				ctx := context.Background()
				x, done, err := newExplorer(ctx, bounds, p, faults{})
				if err != nil {
					t.Fatal(err)
				}
				defer done()
				memoised, err := x.visit(ctx, modelState{})
				if err != nil {
					t.Fatal(err)
				}
				naive := bruteForce(t, bounds, p, faults{})
				if memoised.schedules != naive.schedules || memoised.count != naive.count {
					t.Fatalf("memoised: %d schedules, counts %v; one by one: %d, %v",
						memoised.schedules, memoised.count, naive.schedules, naive.count)
				}
				for prop := range numProperties {
					if got := actionsOf(memoised.best[prop]); !slices.Equal(got, naive.best[prop]) {
						t.Errorf("%s: shortest counterexample %v, one by one %v", propertyNames[prop], got, naive.best[prop])
					}
				}
				if naive.schedules < 10 || naive.count[propGap] == 0 {
					t.Fatalf("%d schedules, %d with a gap: bounds too small to mean anything", naive.schedules, naive.count[propGap])
				}
			})
		}
	}
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
	x, done, err := newExplorer(ctx, bounds, p, f)
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
		if _, _, err := Explore(context.Background(), b); !errors.Is(err, leases.ErrInvalidInput) {
			t.Errorf("bounds %+v: %v, want ErrInvalidInput", b, err)
		}
	}
}
