package leases_test

// Beyond the seed: Observe, and the fence-before-acting protocol that closes
// the gap of C7. These tests are not among the contract's 17.

import (
	"context"
	"testing"

	"leases"
	"leases/internal/scenario"
)

func TestObserveOutcomes(t *testing.T) {
	cases := []struct {
		name       string
		setup      func(*testing.T, leases.Receiver)
		epoch      int64
		want       leases.Outcome
		wantRecord leases.Record
	}{
		{"on an empty receiver", func(*testing.T, leases.Receiver) {}, 1, leases.Accepted,
			leases.Record{Epoch: 1}},
		{"above the stored epoch keeps the value", func(t *testing.T, r leases.Receiver) { mustWrite(t, r, "r", 1, "v1") },
			2, leases.Accepted, leases.Record{Epoch: 2, ValueEpoch: 1, Value: "v1"}},
		{"at the stored epoch", func(t *testing.T, r leases.Receiver) { mustWrite(t, r, "r", 2, "v2") },
			2, leases.Replay, written(2, "v2")},
		{"below the stored epoch", func(t *testing.T, r leases.Receiver) { mustWrite(t, r, "r", 2, "v2") },
			1, leases.Stale, written(2, "v2")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			recv := newStore(t).Receiver(leases.Fenced)
			tc.setup(t, recv)
			got, err := recv.Observe(context.Background(), "r", tc.epoch)
			if err != nil || got.Outcome != tc.want || got.Record != tc.wantRecord {
				t.Fatalf("observe %d: %+v, %v; want %s leaving %+v", tc.epoch, got, err, tc.want, tc.wantRecord)
			}
			if read, _, _ := recv.Read(context.Background(), "r"); read != tc.wantRecord {
				t.Fatalf("stored %+v, want %+v", read, tc.wantRecord)
			}
		})
	}
}

// After an observe, the lower epoch is stale, the observed epoch's first
// write is accepted, and C6 holds again from there.
func TestWritesAfterObserve(t *testing.T) {
	recv := newStore(t).Receiver(leases.Fenced)
	mustWrite(t, recv, "r", 1, "v1")
	if _, err := recv.Observe(context.Background(), "r", 2); err != nil {
		t.Fatal(err)
	}
	observed := leases.Record{Epoch: 2, ValueEpoch: 1, Value: "v1"}
	steps := []struct {
		epoch      int64
		value      string
		want       leases.Outcome
		wantRecord leases.Record
	}{
		{1, "v1", leases.Stale, observed}, // even the exact replay of the old write
		{2, "v2", leases.Accepted, written(2, "v2")},
		{2, "v2", leases.Replay, written(2, "v2")},
		{2, "other", leases.Conflict, written(2, "v2")},
	}
	for _, s := range steps {
		if got := mustWrite(t, recv, "r", s.epoch, s.value); got.Outcome != s.want || got.Record != s.wantRecord {
			t.Fatalf("write %d %q: %+v, want %s leaving %+v", s.epoch, s.value, got, s.want, s.wantRecord)
		}
	}
}

// The fourth real-process scenario: B observes epoch 2 before acting, so
// A's epoch-1 write is stale although B has not written yet.
func TestFenceBeforeActing(t *testing.T) {
	sc, _ := runScenario(t, scenario.FenceBeforeActing)
	if o := findStep(t, sc, "B", "observe", 1); o.Outcome != string(leases.Accepted) || o.Epoch != 2 {
		t.Fatalf("B's observe: %+v", o)
	}
	if a := findStep(t, sc, "A", "write", 1); a.Outcome != string(leases.Stale) {
		t.Fatalf("A's write after B observed: %s, want stale", a.Outcome)
	}
	if b := findStep(t, sc, "B", "write", 1); b.Outcome != string(leases.Accepted) {
		t.Fatalf("B's first write at its observed epoch: %s, want accepted", b.Outcome)
	}
	if v := sc.Verdicts; v.StaleWriteAccepted || !v.StaleWriteRejected || v.NewerValueLost {
		t.Fatalf("verdicts %+v", v)
	}
}
