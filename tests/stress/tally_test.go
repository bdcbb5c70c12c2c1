package stress

// The counts the tests log: what the fleet's faults did, counted as they
// happen, and what the operations answered, counted from the history.

import (
	"time"

	"leases"
	"leases/tests/history"
)

// tally is what a run did, for the log and docs/reliability.md. The load
// leaves the faults' counts at zero.
type tally struct {
	Steps, Operations                     int
	Acquires, Grants, Refusals            int
	Renewals, Releases, Rejections, Late  int
	Accepted, Stale, Replays, Conflicts   int
	Fences, Reads                         int
	Stops, StopsHoldingLock, Pauses       int
	Kills, KillsStopped, KillsHoldingLock int
	Restarts, Unknown                     int
	Wall                                  time.Duration
}

// countAnswers adds the answered operations of h to the tally.
func (s *tally) countAnswers(h *history.History) {
	for _, op := range h.Ops {
		if op.Ret == nil {
			continue
		}
		ok := op.Result() == history.ResultOK
		switch op.Call.Op {
		case "acquire":
			s.Acquires++
			s.Grants += boolCount(ok)
			s.Refusals += boolCount(op.Result() == history.ResultHeld)
		case "renew":
			s.Renewals += boolCount(ok)
		case "release":
			s.Releases += boolCount(ok)
		case "write":
			s.countWrite(op.Ret.Outcome)
		case "fence":
			s.Fences++
		case "read":
			s.Reads++
		}
		switch op.Result() {
		case history.ResultBackwards:
			s.Late++
			s.Rejections++
		case history.ResultExpired, history.ResultNotHolder:
			s.Rejections++
		}
	}
}

func (s *tally) countWrite(outcome leases.Outcome) {
	switch outcome {
	case leases.Accepted:
		s.Accepted++
	case leases.Stale:
		s.Stale++
	case leases.Replay:
		s.Replays++
	case leases.Conflict:
		s.Conflicts++
	}
}

func boolCount(b bool) int {
	if b {
		return 1
	}
	return 0
}
