package report

import (
	"fmt"
	"slices"
	"strings"

	"leases"
	"leases/evidence/diagram"
	"leases/evidence/scenario"
)

// Participants' IDs in the pictures.
const (
	authority = "Auth"
	receiver  = "R"
	clockID   = "Clock"
)

// scenarioDiagram draws a scenario's steps: every worker, the authority
// and the receiver, one request and one answer per step.
func scenarioDiagram(backend string, sc scenario.Scenario) ([]diagram.Participant, []diagram.Line) {
	var workers []string
	for _, s := range sc.Steps {
		if s.Actor != scenario.ClusterActor && !slices.Contains(workers, s.Actor) {
			workers = append(workers, s.Actor)
		}
	}
	slices.Sort(workers)
	var participants []diagram.Participant
	for i, w := range workers {
		participants = append(participants, diagram.Participant{ID: w, Label: "worker " + w + " (process)"})
		if i == 0 {
			// The authority and the receiver between the first worker and
			// the others, so that arrows read left and right.
			participants = append(participants,
				diagram.Participant{ID: authority, Label: "authority (" + backend + ")"},
				diagram.Participant{ID: receiver, Label: "receiver (" + string(sc.Receiver) + ")"})
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
	case scenario.OpResume:
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
