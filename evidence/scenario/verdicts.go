package scenario

import (
	"fmt"

	"leases"
)

// Verdicts are the scenario's claims in a form a reader can check at a
// glance. Each is computed from the steps, never written in.
type Verdicts struct {
	// RefusedOneTickBeforeExpiry: an acquire by another holder at the tick
	// before the live lease's expiry tick was refused.
	RefusedOneTickBeforeExpiry bool `json:"acquire_refused_one_tick_before_expiry"`
	// GrantedAtExpiry: an acquire at exactly the previous lease's expiry
	// tick was granted, with a higher epoch.
	GrantedAtExpiry bool `json:"acquire_granted_at_expiry_tick"`
	// StaleWriteAccepted: a write was accepted whose epoch was below the
	// highest epoch the authority had granted at that moment.
	StaleWriteAccepted bool `json:"stale_write_accepted"`
	// StaleWriteRejected: the receiver rejected a write as stale.
	StaleWriteRejected bool `json:"stale_write_rejected"`
	// NewerValueLost: the final stored value carries a lower epoch than a
	// value that was accepted earlier.
	NewerValueLost bool `json:"newer_value_lost"`
	// TwoValuesAcceptedAtOneEpoch: two different values were accepted with
	// the same epoch.
	TwoValuesAcceptedAtOneEpoch bool `json:"two_values_accepted_at_one_epoch"`
	// ReplayReported: a resent write was recognised as a replay.
	ReplayReported bool `json:"replay_reported"`
	// ConflictRejected: a different value at the stored epoch was rejected.
	ConflictRejected bool `json:"conflict_rejected"`
	// NotLiveRejected: the guarded receiver rejected a write because the
	// writer's lease was not the live one at the write's tick.
	NotLiveRejected bool `json:"not_live_rejected"`
	// WriteNotSentSessionEnded: a holder did not send its write because
	// its session had ended.
	WriteNotSentSessionEnded bool `json:"write_not_sent_session_ended"`
	// MembersAgree: the cluster's members were each read alone, and every
	// one held the same lease epoch and the same record.
	MembersAgree bool `json:"members_agree"`
	// ToolStaleRefused: the tool refused a call as stale, naming as the
	// newest epoch the highest the authority had granted, and did no
	// effect for it.
	ToolStaleRefused bool `json:"tool_call_refused_stale_with_newest_epoch"`
	// ToolReplayOneEffect: a call resent after its answer was lost was
	// answered as a replay, and its operation has exactly one effect.
	ToolReplayOneEffect bool `json:"tool_retry_replayed_one_effect"`
	// ToolConflictRejected: the tool rejected a call whose key was used
	// with another request, and did no effect for it.
	ToolConflictRejected bool `json:"tool_conflict_rejected"`
	// ToolStaleAccepted: the tool did a call whose epoch was below the
	// highest the authority had granted at that moment.
	ToolStaleAccepted bool `json:"tool_stale_call_accepted"`
	// ToolEffectTwice: one operation (epoch and key) has two effects.
	ToolEffectTwice bool `json:"tool_effect_done_twice"`
}

func computeVerdicts(steps []Step, final *leases.Record, finalEffects []ToolEffect) Verdicts {
	var v Verdicts
	var live *Step // the latest granted lease
	highestAccepted := int64(0)
	acceptedAt := map[int64]string{}
	for i := range steps {
		s := &steps[i]
		switch s.Operation {
		case OpAcquire, OpSession:
			if live != nil && s.Actor != live.Actor {
				if s.Outcome == OutcomeRefused && s.Tick == live.ExpiresAt-1 {
					v.RefusedOneTickBeforeExpiry = true
				}
				if s.Outcome == OutcomeGranted && s.Tick == live.ExpiresAt && s.Epoch > live.Epoch {
					v.GrantedAtExpiry = true
				}
			}
			if s.Outcome == OutcomeGranted {
				live = s
			}
		case OpWrite:
			switch leases.Outcome(s.Outcome) {
			case leases.Accepted:
				if s.Epoch < s.HighestEpochGranted {
					v.StaleWriteAccepted = true
				}
				if earlier, ok := acceptedAt[s.Epoch]; ok && earlier != s.Value {
					v.TwoValuesAcceptedAtOneEpoch = true
				}
				acceptedAt[s.Epoch] = s.Value
				highestAccepted = max(highestAccepted, s.Epoch)
			case leases.Stale:
				v.StaleWriteRejected = true
			case leases.Replay:
				v.ReplayReported = true
			case leases.Conflict:
				v.ConflictRejected = true
			case leases.NotLive:
				v.NotLiveRejected = true
			case OutcomeNotSent:
				v.WriteNotSentSessionEnded = true
			}
		}
	}
	v.MembersAgree = membersAgree(steps)
	v.NewerValueLost = final != nil && final.ValueEpoch < highestAccepted
	toolVerdicts(&v, steps, finalEffects)
	return v
}

// toolVerdicts computes the verdicts of the steps that call a tool.
func toolVerdicts(v *Verdicts, steps []Step, finalEffects []ToolEffect) {
	lost := map[string]bool{} // the operations whose answer was lost
	effectsBefore := []ToolEffect{}
	for i := range steps {
		s := &steps[i]
		if s.Operation != OpCallTool {
			continue
		}
		added := len(s.ToolEffectsAfter) > len(effectsBefore)
		op := fmt.Sprintf("%d/%s", s.Epoch, s.Key)
		switch leases.Outcome(s.Outcome) {
		case leases.Stale:
			v.ToolStaleRefused = v.ToolStaleRefused ||
				(s.NewestEpoch == s.HighestEpochGranted && s.Epoch < s.NewestEpoch && !added)
		case leases.Replay:
			v.ToolReplayOneEffect = v.ToolReplayOneEffect || (lost[op] && !added && effectsOf(s.ToolEffectsAfter, s.Epoch, s.Key) == 1)
		case leases.Conflict:
			v.ToolConflictRejected = v.ToolConflictRejected || !added
		case leases.Accepted:
			v.ToolStaleAccepted = v.ToolStaleAccepted || s.Epoch < s.HighestEpochGranted
		}
		if s.Outcome == OutcomeLost {
			lost[op] = true
		}
		effectsBefore = s.ToolEffectsAfter
	}
	for _, e := range finalEffects {
		v.ToolEffectTwice = v.ToolEffectTwice || effectsOf(finalEffects, e.Epoch, e.Key) > 1
	}
}

// effectsOf counts the effects of the operation (epoch, key).
func effectsOf(effects []ToolEffect, epoch int64, key string) int {
	n := 0
	for _, e := range effects {
		if e.Epoch == epoch && e.Key == key {
			n++
		}
	}
	return n
}

// membersAgree reports whether the steps read the cluster's members one
// by one and every member gave the same epoch and record.
func membersAgree(steps []Step) bool {
	var first *Step
	for i := range steps {
		s := &steps[i]
		if s.Operation != OpReadMember {
			continue
		}
		if first == nil {
			first = s
			continue
		}
		if s.Epoch != first.Epoch || (s.ReceiverAfter == nil) != (first.ReceiverAfter == nil) ||
			s.ReceiverAfter != nil && *s.ReceiverAfter != *first.ReceiverAfter {
			return false
		}
	}
	return first != nil
}

// Claims are the verdicts that hold, each in a few words, in the order a
// reader checks them; the claims of a weakness are in capitals.
func (v Verdicts) Claims() []string {
	var claims []string
	add := func(ok bool, claim string) {
		if ok {
			claims = append(claims, claim)
		}
	}
	add(v.GrantedAtExpiry, "granted at the expiry tick")
	add(v.RefusedOneTickBeforeExpiry, "refused one tick before")
	add(v.StaleWriteAccepted, "STALE WRITE ACCEPTED")
	add(v.StaleWriteRejected, "stale write rejected")
	add(v.NewerValueLost, "NEWER VALUE LOST")
	add(v.TwoValuesAcceptedAtOneEpoch, "TWO VALUES AT ONE EPOCH")
	add(v.ReplayReported, "replay reported")
	add(v.ConflictRejected, "conflict rejected")
	add(v.NotLiveRejected, "rejected as not live")
	add(v.WriteNotSentSessionEnded, "write not sent: session ended")
	add(v.MembersAgree, "members agree")
	add(v.ToolStaleRefused, "tool refused the stale call (newest epoch named)")
	add(v.ToolReplayOneEffect, "retry after a lost answer replayed, one effect")
	add(v.ToolConflictRejected, "tool rejected the key's other request")
	add(v.ToolStaleAccepted, "STALE TOOL CALL DONE")
	add(v.ToolEffectTwice, "TOOL EFFECT DONE TWICE")
	return claims
}

// Work is what a scenario's steps asked of its store, for the command's
// timings (every operation of package leases is one transaction).
type Work struct {
	// Writes commit a change; Reads change nothing (a refusal, a replay,
	// a read, the controller's read of the receiver after every step and
	// at the end, and a member's reads of the lease and the receiver).
	Writes, Reads int
	// Workers is how many worker processes opened a store.
	Workers int
	// On a cluster: the leaders stopped (until the others serve again:
	// an election each) and the members restarted.
	Elections, Restarts int
}

// Add adds other's counts to w's.
func (w *Work) Add(other Work) {
	w.Writes += other.Writes
	w.Reads += other.Reads
	w.Workers += other.Workers
	w.Elections += other.Elections
	w.Restarts += other.Restarts
}

// Work counts what the scenario's steps asked of its store.
func (sc Scenario) Work() Work {
	var w Work
	actors := map[string]bool{}
	for _, s := range sc.Steps {
		if s.Actor != ClusterActor && s.Actor != ToolActor {
			actors[s.Actor] = true
		}
		if s.Operation == OpReadMember {
			w.Reads += 2 // the lease and the receiver; the controller reads nothing after it
			continue
		}
		w.Reads++ // the controller reads the receiver after every step
		switch {
		case s.Operation == OpExit, s.Operation == OpStartTool, s.Operation == OpCallTool,
			s.Operation == OpResume && s.Outcome == OutcomeContinued:
			// nothing asked of the store: the tool keeps its own database
		case s.Operation == OpStopLeader:
			w.Elections++
		case s.Operation == OpRestart:
			w.Restarts++
		case s.Operation == OpRead, s.Outcome == OutcomeRefused,
			s.Outcome == string(leases.Replay), s.Outcome == string(leases.Conflict), s.Outcome == string(leases.Stale):
			w.Reads++
		default:
			w.Writes++
		}
	}
	w.Reads++ // the final read
	w.Workers = len(actors)
	return w
}
