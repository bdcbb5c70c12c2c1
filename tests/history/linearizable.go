package history

import (
	"maps"
	"math"
	"slices"
	"time"

	"github.com/anishathalye/porcupine"

	"leases"
)

// Linearizable checks the history of the authority's calls, the fenced
// transactions and the receiver's calls against Model, within timeout.
// It tries readsAround first, and porcupine on the whole history where
// that finds no linearization.
func (h *History) Linearizable(timeout time.Duration) (porcupine.CheckResult, porcupine.LinearizationInfo, int) {
	ops := h.porcupineOps()
	if readsAround(ops, timeout) {
		return porcupine.Ok, porcupine.LinearizationInfo{}, len(ops)
	}
	result, info := porcupine.CheckOperationsVerbose(Model.ToModel(), ops, timeout)
	return result, info, len(ops)
}

// porcupineOps is the history as porcupine takes it. A failure before
// commit changed nothing and is left out; an operation whose outcome is
// unknown, or whose worker was killed during it, may take effect at any
// time after its call (porcupine's open-ended operation: it never
// returns), or, where a kill ends a call's effects (KillEndsCalls), any
// time before the kill. A transaction is open from the moment it was
// about to commit, its row's fate read from the database. Last comes
// what the databases hold once every worker has exited: after every
// operation that returned, concurrent with those that never did.
func (h *History) porcupineOps() []porcupine.Operation {
	rows := h.rowsByOp()
	var ops []porcupine.Operation
	var last int64 // the latest call or return that is known
	for i, op := range h.Ops {
		operation, ok := h.porcupineOp(op, rows)
		if !ok {
			continue
		}
		operation.ClientId = i
		ops = append(ops, operation)
		last = max(last, operation.Call)
		if operation.Return != math.MaxInt64 {
			last = max(last, operation.Return)
		}
	}
	resources := map[string]bool{}
	for _, op := range ops {
		resources[op.Input.(Input).Resource] = true
	}
	for _, r := range slices.Sorted(maps.Keys(resources)) {
		ops = append(ops, porcupine.Operation{ClientId: len(h.Ops), Input: Input{Op: "final", Resource: r}, Call: last + 1,
			Output: h.final(r), Return: last + 1})
	}
	return ops
}

// porcupineOp is op as porcupine takes it; false if the model has no
// part in it.
func (h *History) porcupineOp(op *Op, rows map[string]Row) (porcupine.Operation, bool) {
	in := Input{Op: op.Call.Op, Resource: op.Call.Resource, Holder: op.Call.Holder, Epoch: op.Call.Epoch,
		Now: op.Call.Now, TTL: op.Call.TTL, Value: op.Call.Value, ServerTime: op.Call.ServerTime}
	out := Output{Result: op.Result()}
	call, ret := op.Call.T, int64(math.MaxInt64)
	if r := op.Ret; r != nil {
		ret = r.T
		out.Last, out.Seq, out.Outcome, out.Found = r.Last, r.Seq, r.Outcome, r.Found
		if l := r.Lease; l != nil {
			out.Holder, out.Epoch, out.GrantedAt, out.ExpiresAt = l.Holder, l.Epoch, l.GrantedAt, l.ExpiresAt
		}
		if s := r.Stored; s != nil {
			out.Fence, out.ValueEpoch, out.Value = s.Epoch, s.ValueEpoch, s.Value
		}
	}
	if op.Call.Op == "tool" && op.Sent != nil {
		call = op.Sent.T // the server cannot have seen it before
	}
	if op.Call.Op == "tool" && op.Ret != nil {
		out.Fence = op.Ret.Newest
		if op.Ret.Outcome == leases.InProgress {
			// Answered before the epoch's check when the first call still
			// runs: it may or may not have admitted the epoch.
			out.Result = ResultUnknown
		}
	}
	switch out.Result {
	case ResultUnknown:
		ret = math.MaxInt64
	case ResultKilled:
		if op.Killed == nil || !h.KillEndsCalls {
			ret = math.MaxInt64
		} else {
			ret = op.Killed.T
		}
	case ResultOK, ResultNone, ResultHeld, ResultBackwards, ResultNotHolder, ResultExpired, ResultSuperseded:
	default:
		return porcupine.Operation{}, false // nothing changed
	}
	switch op.Call.Op {
	case "acquire", "renew", "release", "tenure", "write", "fence", "tool":
	case "holder", "count", "read":
		if op.Ret == nil || out.Result == ResultUnknown {
			return porcupine.Operation{}, false // a read with no answer says nothing
		}
	case "tx":
		if out.Result == ResultSuperseded {
			break
		}
		row, committed := rows[op.Call.OpID]
		if !committed {
			return porcupine.Operation{}, false // rolled back: its row is not there (checked apart)
		}
		in.Seq, out.Result = row.Seq, ResultOK
		if op.Commit != nil {
			call = op.Commit.T
		}
	default:
		return porcupine.Operation{}, false // the worker's own steps (wait, check, close): not the model's
	}
	return porcupine.Operation{Input: in, Call: call, Output: out, Return: ret}, true
}

// final is what the databases hold of resource r once every worker has
// exited: the lessor's epoch, the fence and the counter, and where the
// test read them, the lease row and the receiver's record (whose epoch
// is the fence).
func (h *History) final(r string) Output {
	out := Output{Result: ResultOK, Epoch: h.Epochs[r], Fence: h.Fences[r], Seq: h.Counters[r]}
	if row, ok := h.Leases[r]; ok {
		out.Row, out.Holder, out.GrantedAt, out.ExpiresAt, out.LastTick = true, row.Holder, row.GrantedAt, row.ExpiresAt, row.LastTick
	}
	if h.Records != nil {
		rec := h.Records[r]
		out.Stored, out.Fence, out.ValueEpoch, out.Value = true, rec.Epoch, rec.ValueEpoch, rec.Value
	}
	return out
}
