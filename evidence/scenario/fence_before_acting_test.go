package scenario_test

// Beyond the seed: the fence-before-acting protocol that narrows the gap of
// C7 (Observe's outcomes are a clause of the contract: TestFencedReceiverOutcomes/observe).
// Not among the contract's 17.

import (
	"testing"

	"leases"
	"leases/evidence/experimenttest"
	"leases/evidence/scenario"
)

// The fourth real-process scenario: B raises the fence to epoch 2 before acting, so
// A's epoch-1 write is stale although B has not written yet.
func TestFenceBeforeActing(t *testing.T) {
	sc, _ := experimenttest.RunScenario(t, scenario.FenceBeforeActing)
	if o := experimenttest.FindStep(t, sc, "B", "fence", 1); o.Outcome != string(leases.Accepted) || o.Epoch != 2 {
		t.Fatalf("B's observe: %+v", o)
	}
	if a := experimenttest.FindStep(t, sc, "A", "write", 1); a.Outcome != string(leases.Stale) {
		t.Fatalf("A's write after B observed: %s, want stale", a.Outcome)
	}
	if b := experimenttest.FindStep(t, sc, "B", "write", 1); b.Outcome != string(leases.Accepted) {
		t.Fatalf("B's first write at its observed epoch: %s, want accepted", b.Outcome)
	}
	if v := sc.Verdicts; v.StaleWriteAccepted || !v.StaleWriteRejected || v.NewerValueLost {
		t.Fatalf("verdicts %+v", v)
	}
}
