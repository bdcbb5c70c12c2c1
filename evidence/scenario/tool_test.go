package scenario_test

// Beyond the seed: the tool path. A tool server in a process of its own
// (package httpfence in front of package ops, on a SQLite file of the
// tool's) and agents that are worker processes holding the backend's
// leases. Not among the contract's 17.

import (
	"testing"

	"leases"
	"leases/evidence/experimenttest"
	"leases/evidence/scenario"
)

func TestToolScenarios(t *testing.T) {
	tests := []struct {
		name  string
		check func(t *testing.T, sc scenario.Scenario)
	}{
		{scenario.ToolRefusesPausedAgent, func(t *testing.T, sc scenario.Scenario) {
			// A's second call, with epoch 1 after B's epoch 2 reached the tool.
			a := experimenttest.FindStep(t, sc, "A", scenario.OpCallTool, 2)
			if a.Outcome != string(leases.Stale) || a.Status != 409 || a.NewestEpoch != 2 || a.Epoch != 1 {
				t.Fatalf("the paused agent's call: %+v, want stale, 409, newest epoch 2", a)
			}
			if len(a.ToolEffectsAfter) != 3 || len(sc.FinalToolEffects) != 3 {
				t.Fatalf("effects %v, at the end %v: want A's first and B's two", a.ToolEffectsAfter, sc.FinalToolEffects)
			}
		}},
		{scenario.ToolReplaysRetriedCall, func(t *testing.T, sc scenario.Scenario) {
			lost := experimenttest.FindStep(t, sc, "A", scenario.OpCallTool, 1)
			retry := experimenttest.FindStep(t, sc, "A", scenario.OpCallTool, 2)
			if lost.Outcome != scenario.OutcomeLost || len(lost.ToolEffectsAfter) != 1 {
				t.Fatalf("the first call: %+v, want its answer lost and its effect done", lost)
			}
			if retry.Outcome != string(leases.Replay) || retry.Status != 201 || len(sc.FinalToolEffects) != 1 {
				t.Fatalf("the retry: %+v, effects at the end %v: want a replay of 201 and one effect", retry, sc.FinalToolEffects)
			}
		}},
		{scenario.ToolRejectsConflictingKey, func(t *testing.T, sc scenario.Scenario) {
			other := experimenttest.FindStep(t, sc, "B", scenario.OpCallTool, 2)
			if other.Outcome != string(leases.Conflict) || other.Status != 422 || len(other.ToolEffectsAfter) != 1 {
				t.Fatalf("another request under op-1: %+v, want a conflict (422) and no effect", other)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sc, _ := experimenttest.RunScenario(t, tc.name)
			tc.check(t, sc)
			v := sc.Verdicts
			if v.ToolStaleAccepted || v.ToolEffectTwice {
				t.Fatalf("verdicts %+v: a stale call done, or an effect done twice", v)
			}
			if !v.ToolStaleRefused && !v.ToolReplayOneEffect && !v.ToolConflictRejected {
				t.Fatalf("verdicts %+v: no claim of the tool holds", v)
			}
		})
	}
}
