package history

import (
	"fmt"
	"time"
)

// resolvedRight: a transaction whose outcome was unknown to its worker
// is resolved (fence.Tenure.Resolve) before the worker goes on, and
// every answer Resolve gave is what the database holds afterwards:
// "committed" if and only if the row is there. "Still unknown" is
// allowed, and counted (Resolutions); a wrong answer never is: a worker
// that retried on a wrong "not committed" would do its work twice.
func resolvedRight(h *History) []string {
	rows := h.rowsByOp()
	resolves := map[string]*Op{}
	for _, op := range h.opsOf("resolve") {
		resolves[op.Call.OpID] = op
	}
	lastCall := map[string]int64{}
	for _, op := range h.Ops {
		lastCall[op.Worker] = max(lastCall[op.Worker], op.Call.T)
	}
	var bad []string
	for _, tx := range h.opsOf("tx", ResultUnknown) {
		if resolves[tx.Call.OpID] == nil && lastCall[tx.Worker] > tx.Ret.T {
			bad = append(bad, fmt.Sprintf("%s: transaction %s had an unknown outcome (%s), and its worker went on without resolving it",
				tx.Worker, tx.Call.OpID, tx.Ret.Err))
		}
	}
	for _, op := range h.opsOf("resolve") {
		row, committed := rows[op.Call.OpID]
		switch op.Result() {
		case ResultKilled, ResultUnknown:
		case ResultOK:
			if op.Ret.Committed == committed {
				continue
			}
			when := ""
			if row.CommittedAt != 0 {
				when = fmt.Sprintf(", committed %v after Resolve returned", time.Duration(row.CommittedAt-op.Ret.T).Round(time.Microsecond))
			}
			bad = append(bad, fmt.Sprintf("WRONG RESOLUTION: %s: Resolve of %s answered committed=%v, and the row is there: %v%s",
				op.Worker, op.Call.OpID, op.Ret.Committed, committed, when))
		default:
			bad = append(bad, fmt.Sprintf("%s: Resolve of %s answered neither committed, not committed nor still unknown: %s (%s)",
				op.Worker, op.Call.OpID, op.Result(), op.Ret.Err))
		}
	}
	return bad
}

// Resolutions counts the transactions whose outcome was unknown to their
// worker, and what Resolve answered of them.
type Resolutions struct {
	// Unknown are the transactions whose Tx returned an unknown outcome;
	// Unresolved, those of them for which no Resolve was called (the
	// worker was killed first); StillUnknown, those whose last Resolve
	// still could not tell.
	Unknown, Unresolved, StillUnknown int
	// The answers of the Resolve calls: Committed, NotCommitted, Unknown
	// (an error matching leases.ErrOutcomeUnknown, after which the worker
	// asks again within its bound), and Killed (the worker was killed
	// during the call); Wrong are the answers that the database
	// contradicts (each a violation of resolvedRight).
	Calls struct{ Committed, NotCommitted, Unknown, Killed, Wrong int }
}

// Resolutions counts h's unknown outcomes and their resolutions.
func (h *History) Resolutions() Resolutions {
	var r Resolutions
	rows := h.rowsByOp()
	last := map[string]string{} // by OpID: the last Resolve's result
	for _, op := range h.opsOf("resolve") {
		last[op.Call.OpID] = op.Result()
		_, committed := rows[op.Call.OpID]
		switch op.Result() {
		case ResultKilled:
			r.Calls.Killed++
		case ResultUnknown:
			r.Calls.Unknown++
		case ResultOK:
			if op.Ret.Committed {
				r.Calls.Committed++
			} else {
				r.Calls.NotCommitted++
			}
			if op.Ret.Committed != committed {
				r.Calls.Wrong++
			}
		}
	}
	for _, tx := range h.opsOf("tx", ResultUnknown) {
		r.Unknown++
		switch last[tx.Call.OpID] {
		case "":
			r.Unresolved++
		case ResultUnknown:
			r.StillUnknown++
		}
	}
	return r
}
