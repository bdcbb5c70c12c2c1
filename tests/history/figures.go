package history

import (
	"slices"
	"time"
)

// ReleaseToGrant is, for each grant that followed a release while its
// worker was waiting, the time from the release's return to the grant's;
// undisturbed are those during which no process was stopped (a worker
// stopped holding the lessor's write lock holds every grant up).
func (h *History) ReleaseToGrant() (all, undisturbed []time.Duration) {
	released := map[key]*Op{}
	for _, op := range h.opsOf("release", ResultOK) {
		released[key{op.Call.Resource, op.Call.Epoch}] = op
	}
	// The Wait each grant ended, by worker: the latest Wait call before it.
	waits := map[string][]*Op{}
	for _, op := range h.opsOf("wait") {
		waits[op.Worker] = append(waits[op.Worker], op)
	}
	for _, op := range h.opsOf("acquire", ResultOK) {
		l := op.Ret.Lease
		rel := released[key{l.Resource, l.Epoch - 1}]
		if rel == nil {
			continue
		}
		var wait *Op
		for _, w := range waits[op.Worker] {
			if w.Call.T <= op.Call.T {
				wait = w
			}
		}
		if wait == nil || wait.Call.T >= rel.Ret.T {
			continue // not waiting when the lease was released
		}
		d := time.Duration(op.Ret.T - rel.Ret.T)
		all = append(all, d)
		disturbed := false
		for worker := range h.Stopped {
			disturbed = disturbed || h.stoppedBetween(worker, rel.Ret.T, op.Ret.T)
		}
		if !disturbed {
			undisturbed = append(undisturbed, d)
		}
	}
	return all, undisturbed
}

// AfterFault is how long after a fault the service path went on: the
// time from the moment the fault was in effect to the return of the
// first call invoked after it that was accepted. Nil where none came
// before the run ended.
type AfterFault struct {
	// Grant: an acquire that returned ok.
	Grant *time.Duration
	// Write: a renewal that returned ok or a fenced transaction that
	// committed (its row is there); Renewal, a renewal alone, the
	// lessor's own write (a transaction goes to the worker's database).
	Write, Renewal *time.Duration
}

// AfterFault is what came after a fault in effect from at (nanoseconds
// since the Unix epoch). Calls already under way then do not count: they
// may have been decided before it.
func (h *History) AfterFault(at int64) AfterFault {
	rows := h.rowsByOp()
	first := func(ops ...[]*Op) *time.Duration {
		var next int64
		for _, op := range slices.Concat(ops...) {
			if _, committed := rows[op.Call.OpID]; op.Call.Op == "tx" && !committed {
				continue
			}
			if op.Call.T >= at && (next == 0 || op.Ret.T < next) {
				next = op.Ret.T
			}
		}
		if next == 0 {
			return nil
		}
		d := time.Duration(next - at)
		return &d
	}
	renewals := h.opsOf("renew", ResultOK)
	return AfterFault{
		Grant:   first(h.opsOf("acquire", ResultOK)),
		Write:   first(renewals, h.opsOf("tx", ResultOK)),
		Renewal: first(renewals),
	}
}
