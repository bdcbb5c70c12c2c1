package report

import (
	"fmt"
	"slices"
	"strings"

	"leases"
	"leases/evidence/backend"
	"leases/evidence/diagram"
	"leases/evidence/scenario"
)

// Participants' IDs in the pictures.
const (
	authority = "Auth"
	receiver  = "R"
	clockID   = "Clock"
	toolID    = "Tool"
)

// scenarioDiagram draws a scenario's steps: every worker, the authority
// and the receiver, one request and one answer per step.
func scenarioDiagram(backendName string, sc scenario.Scenario) ([]diagram.Participant, []diagram.Line) {
	var workers []string
	for _, s := range sc.Steps {
		if s.Actor != scenario.ClusterActor && s.Actor != scenario.ToolActor && !slices.Contains(workers, s.Actor) {
			workers = append(workers, s.Actor)
		}
	}
	slices.Sort(workers)
	// The authority and the receiver (or the tool) between the first
	// worker and the others, so that arrows read left and right.
	middle := diagram.Participant{ID: receiver, Label: "receiver (" + string(sc.Receiver) + ")"}
	if sc.Receiver == backend.HTTPTool {
		middle = diagram.Participant{ID: toolID, Label: "tool server (process, its own SQLite)"}
	}
	var participants []diagram.Participant
	for i, w := range workers {
		participants = append(participants, diagram.Participant{ID: w, Label: "worker " + w + " (process)"})
		if i == 0 {
			participants = append(participants, diagram.Participant{ID: authority, Label: "authority (" + backendName + ")"}, middle)
		}
	}
	var lines []diagram.Line
	for _, s := range sc.Steps {
		lines = append(lines, stepLines(s)...)
	}
	return participants, lines
}

// stepLines is one step as a request and its answer, or as a note.
func stepLines(s scenario.Step) []diagram.Line {
	call := func(to, request, answer string) []diagram.Line {
		return []diagram.Line{diagram.Call(s.Actor, to, request), diagram.Answer(to, s.Actor, answer)}
	}
	switch s.Operation {
	case scenario.OpAcquire, scenario.OpSession:
		request := fmt.Sprintf("acquire at tick %d", s.Tick)
		if s.Operation == scenario.OpSession {
			request = fmt.Sprintf("start a session at tick %d", s.Tick)
		}
		if s.Outcome == scenario.OutcomeRefused {
			return call(authority, request, "refused: "+refusal(s.Detail))
		}
		return call(authority, request, fmt.Sprintf("granted: epoch %d, expires at tick %d", s.Epoch, s.ExpiresAt))
	case scenario.OpWrite:
		if s.Outcome == scenario.OutcomeNotSent {
			return []diagram.Line{diagram.Note(s.Actor, fmt.Sprintf("its session has ended: it does not send %q", s.Value))}
		}
		return call(receiver, fmt.Sprintf("write %q with epoch %d at tick %d", s.Value, s.Epoch, s.Tick), s.Outcome+after(s))
	case scenario.OpFence:
		return call(receiver, fmt.Sprintf("raise the fence to epoch %d", s.Epoch), s.Outcome+after(s))
	case scenario.OpRead:
		return call(receiver, "read", record(s.ReceiverAfter))
	case scenario.OpPause:
		return []diagram.Line{diagram.Note(s.Actor, "paused: SIGSTOP")}
	case scenario.OpStartTool:
		return []diagram.Line{diagram.Note(toolID, "starts, on a SQLite file of its own")}
	case scenario.OpCallTool:
		return call(toolID, fmt.Sprintf("POST %q, epoch %d, key %s", s.Value, s.Epoch, s.Key), toolAnswer(s))
	case scenario.OpResume:
		if s.Outcome == scenario.OutcomeContinued {
			return []diagram.Line{diagram.Note(s.Actor, fmt.Sprintf("continues (SIGCONT) at tick %d, no session", s.Tick))}
		}
		if s.Outcome == scenario.OutcomeEnded {
			return []diagram.Line{diagram.Note(s.Actor, fmt.Sprintf("continues (SIGCONT) at tick %d: its session has ended", s.Tick))}
		}
		return []diagram.Line{diagram.Note(s.Actor, fmt.Sprintf("continues (SIGCONT) at tick %d", s.Tick))}
	case scenario.OpExit:
		return []diagram.Line{diagram.Note(s.Actor, "exits")}
	case scenario.OpStopLeader:
		return []diagram.Line{diagram.Note(authority, "the leader member stops")}
	case scenario.OpRestart:
		return []diagram.Line{diagram.Note(authority, "the stopped member restarts and catches up")}
	case scenario.OpReadMember:
		return []diagram.Line{diagram.Note(authority, fmt.Sprintf("%s alone: lease epoch %d, %s", s.Detail, s.Epoch, record(s.ReceiverAfter)))}
	}
	return []diagram.Line{diagram.Note(s.Actor, s.Operation+": "+s.Outcome)}
}

// toolAnswer is the tool's answer to a call, and its effects after it.
func toolAnswer(s scenario.Step) string {
	answer := fmt.Sprintf("%d %s", s.Status, s.Outcome)
	switch s.Outcome {
	case scenario.OutcomeLost:
		answer = "done, answer lost on the way"
	case string(leases.Stale):
		answer += fmt.Sprintf(", newest epoch %d", s.NewestEpoch)
	}
	return fmt.Sprintf("%s (effects: %d)", answer, len(s.ToolEffectsAfter))
}

// after says what the receiver holds after a write or an observe.
func after(s scenario.Step) string {
	return " (" + record(s.ReceiverAfter) + ")"
}

// record describes a receiver's record in a few words.
func record(r *leases.Record) string {
	switch {
	case r == nil:
		return "nothing stored"
	case r.ValueEpoch == 0:
		return fmt.Sprintf("fence at epoch %d, no value", r.Epoch)
	case r.ValueEpoch == r.Epoch:
		return fmt.Sprintf("holds %q at epoch %d", r.Value, r.Epoch)
	}
	return fmt.Sprintf("fence at epoch %d, %q from epoch %d", r.Epoch, r.Value, r.ValueEpoch)
}

// refusal is the authority's reason for a refusal, without the call it
// refused: `resource "r" is held by "A" until tick 3`.
func refusal(detail string) string {
	if _, reason, ok := strings.Cut(detail, leases.ErrLeaseHeld.Error()+": "); ok {
		return reason
	}
	return detail
}

// counterexampleDiagram draws an explored schedule from its lines, which
// the explorer writes in one of two shapes: "clock: tick N", or a
// worker's step, "A acquires at tick 0: epoch 1, expires at tick 2".
func counterexampleDiagram(schedule []string) ([]diagram.Participant, []diagram.Line, error) {
	var lines []diagram.Line
	var workers []string
	for _, line := range schedule {
		if tick, ok := strings.CutPrefix(line, "clock: "); ok {
			lines = append(lines, diagram.Note(clockID, tick))
			continue
		}
		worker, rest, ok := strings.Cut(line, " ")
		request, answer, ok2 := strings.Cut(rest, ": ")
		if !ok || !ok2 {
			return nil, nil, fmt.Errorf("a step the pictures cannot read: %q", line)
		}
		to := receiver
		if strings.HasPrefix(request, "acquires") {
			to = authority
		}
		if !slices.Contains(workers, worker) {
			workers = append(workers, worker)
		}
		lines = append(lines, diagram.Call(worker, to, request), diagram.Answer(to, worker, answer))
	}
	slices.Sort(workers)
	participants := []diagram.Participant{{ID: clockID, Label: "clock"}}
	for _, w := range workers {
		participants = append(participants, diagram.Participant{ID: w, Label: "worker " + w})
	}
	participants = append(participants,
		diagram.Participant{ID: authority, Label: "authority"}, diagram.Participant{ID: receiver, Label: "receiver"})
	return participants, lines, nil
}
