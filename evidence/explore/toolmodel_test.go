package explore

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"leases"
)

// With the record, no operation is ever done twice and no stale call does
// an effect, though resends happen in many schedules; without it, both
// happen: the counters can fail.
func TestExploreToolsRecordAgainstUnprotected(t *testing.T) {
	ex, _, err := ExploreTools(context.Background(), sqlite, DefaultToolBounds)
	if err != nil {
		t.Fatal(err)
	}
	if len(ex.Variants) != 2 {
		t.Fatalf("variants %+v", ex.Variants)
	}
	record, unprotected := ex.Variants[0], ex.Variants[1]
	if record.Variant != WithRecord || record.Schedules == 0 || record.Resent == 0 {
		t.Fatalf("with the record: %+v; want schedules, some with a resend", record)
	}
	if record.DoubleEffects != 0 || record.StaleEffects != 0 {
		t.Errorf("with the record: %d schedules with a double effect, %d with a stale one; want 0 and 0",
			record.DoubleEffects, record.StaleEffects)
	}
	// More schedules: a stale answer stops a worker, and without the
	// record no answer is stale.
	if unprotected.Variant != Unprotected || unprotected.Schedules <= record.Schedules {
		t.Fatalf("unprotected: %+v; want more than the record's %d schedules", unprotected, record.Schedules)
	}
	if unprotected.DoubleEffects == 0 || unprotected.StaleEffects == 0 {
		t.Errorf("unprotected: %d double, %d stale; want both above 0", unprotected.DoubleEffects, unprotected.StaleEffects)
	}
	if len(unprotected.Counterexamples) != 3 || len(record.Counterexamples) != 1 {
		t.Errorf("counterexamples: record %v, unprotected %v", record.Counterexamples, unprotected.Counterexamples)
	}
}

// The memo counts every schedule: the same figures as running each
// schedule from the start, one by one.
func TestExploreToolsCountsEverySchedule(t *testing.T) {
	for _, bounds := range []ToolBounds{
		{Workers: 1, TTL: 1, LastTick: 0, Operations: 1, Sends: 1},
		{Workers: 1, TTL: 1, LastTick: 0, Operations: 2, Sends: 2},
		{Workers: 2, TTL: 1, LastTick: 1, Operations: 1, Sends: 2},
	} {
		for _, v := range toolVariants {
			t.Run(fmt.Sprintf("%s %+v", v, bounds), func(t *testing.T) {
				ctx := context.Background()
				x, done, err := newToolExplorer(ctx, sqlite, bounds, v, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer done()
				memoised, err := x.visit(ctx, toolState{}, nil, nothingChanged)
				if err != nil {
					t.Fatal(err)
				}
				schedules, counts := toolBruteForce(t, bounds, v)
				if memoised.schedules != schedules || memoised.count != counts {
					t.Fatalf("memoised: %d schedules, counts %v; one by one: %d, %v", memoised.schedules, memoised.count, schedules, counts)
				}
			})
		}
	}
}

// One worker, one operation, one send: one schedule for each answer,
// delivered or lost (and nothing else can happen).
func TestExploreToolsOneCall(t *testing.T) {
	ex, _, err := ExploreTools(context.Background(), sqlite, ToolBounds{Workers: 1, TTL: 1, LastTick: 0, Operations: 1, Sends: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range ex.Variants {
		if v.Schedules != 2 || v.Resent != 0 || v.DoubleEffects != 0 || v.StaleEffects != 0 {
			t.Errorf("%+v; want 2 schedules and nothing else", v)
		}
	}
}

func TestExploreToolsRejectsBadBounds(t *testing.T) {
	for _, b := range []ToolBounds{
		{Workers: 0, TTL: 1, Operations: 1, Sends: 1},
		{Workers: 1, TTL: 1, Operations: 0, Sends: 1},
		{Workers: 1, TTL: 1, Operations: maxOperations + 1, Sends: 1},
		{Workers: 1, TTL: 1, Operations: 1, Sends: 0},
		{Workers: 1, TTL: 1, Operations: 1, Sends: maxSends + 1},
	} {
		if _, _, err := ExploreTools(context.Background(), sqlite, b); !errors.Is(err, leases.ErrInvalidInput) {
			t.Errorf("%+v: %v, want invalid input", b, err)
		}
	}
}

// toolBruteForce runs every schedule from the start on fresh databases,
// without the memo, and counts them and their properties.
func toolBruteForce(t *testing.T, bounds ToolBounds, v ToolVariant) (int64, [numProperties]int64) {
	t.Helper()
	ctx := context.Background()
	var schedules int64
	var counts [numProperties]int64
	var walk func(prefix []int8)
	walk = func(prefix []int8) {
		x, done, err := newToolExplorer(ctx, sqlite, bounds, v, nil)
		if err != nil {
			t.Fatal(err)
		}
		var s toolState
		for _, a := range prefix {
			if s, _, err = x.step(ctx, s, a); err != nil {
				t.Fatal(err)
			}
		}
		actions := x.enabled(&s, nil)
		done()
		if len(actions) == 0 {
			schedules++
			for prop := range numToolProperties {
				if s.seen[prop] {
					counts[prop]++
				}
			}
		}
		for _, a := range actions {
			walk(append(append([]int8(nil), prefix...), a))
		}
	}
	walk(nil)
	return schedules, counts
}
