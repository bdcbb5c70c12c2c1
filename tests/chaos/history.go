package chaos

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// Op is one operation a worker made: its call, its return (nil when the
// worker was killed during it) and, for a transaction, the moment it was
// about to send COMMIT.
type Op struct {
	Worker string
	Call   Record
	Ret    *Record
	Commit *Record
}

// Result is what the operation returned, or resultKilled.
func (o *Op) Result() string {
	if o.Ret == nil {
		return resultKilled
	}
	return o.Ret.Result
}

// Done is a session's end as a worker saw it.
type Done struct {
	Worker string
	Record
}

// Interval is a span of wall-clock time, in nanoseconds since the Unix
// epoch.
type Interval struct{ From, To int64 }

// Starvation is a span in which a worker's reference timer fired Late
// nanoseconds late in all.
type Starvation struct {
	Interval
	Late int64
}

// Row is a business row as the database holds it afterwards.
type Row struct {
	Resource     string
	Seq, Epoch   int64
	Writer, OpID string
	// CommittedAt is when the row's transaction committed on the
	// server's clock, in nanoseconds since the Unix epoch (PostgreSQL's
	// commit timestamp, to the microsecond): 0 where the server does not
	// keep them (track_commit_timestamp, in the guarded variant only).
	CommittedAt int64
}

// History is what a run left: the workers' records, the controller's
// pauses, and the databases' final state.
type History struct {
	Ops   []*Op
	Dones []Done
	// Stopped holds each worker's stops (SIGSTOP to SIGCONT), by holder;
	// Starved, the spans in which its reference timer could not fire
	// (from its "starved" records).
	Stopped map[string][]Interval
	Starved map[string][]Starvation
	// LessorCommits are the moments each worker's transactions on the
	// lessor's file began to commit (on etcd: its transactions that
	// write were sent).
	LessorCommits map[string][]int64
	// What the databases hold afterwards: the business rows, the fence
	// and the counter per resource, and the lessor's last epoch per
	// resource.
	Rows     []Row
	Fences   map[string]int64
	Counters map[string]int64
	Epochs   map[string]int64
	// Held are the guarded variant's COMMITs held with their backend
	// stopped, as the controller saw them when it continued the backend.
	Held []HeldCommit
	// LessorRows is, on etcd, every write of the lessor's lease rows in
	// the cluster's history, in revision order; nil elsewhere.
	LessorRows []RowWrite
	// Killed is when the controller killed each worker it killed (wall
	// clock, nanoseconds), by holder: no call of that worker's can have
	// sent anything later.
	Killed map[string]int64
}

// RowWrite is one write of a resource's lease row, as the lessor's
// history holds it.
type RowWrite struct {
	Resource, Holder string
	Epoch            int64
	Held             bool
	Revision         int64
}

// Read adds the records a worker wrote on r to h. A last line cut short
// by a kill is dropped.
func (h *History) Read(worker string, r io.Reader) error {
	open := map[int64]*Op{}
	lines := bufio.NewScanner(r)
	lines.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for lines.Scan() {
		var rec Record
		if err := json.Unmarshal(lines.Bytes(), &rec); err != nil {
			continue // the last line, cut by a kill; an earlier one would be garbled and fail below
		}
		if err := h.add(worker, rec, open); err != nil {
			return err
		}
	}
	return lines.Err()
}

// Add adds one record of worker; open holds the worker's calls that have
// not returned yet, by id.
func (h *History) add(worker string, rec Record, open map[int64]*Op) error {
	switch rec.Kind {
	case "call":
		op := &Op{Worker: worker, Call: rec}
		open[rec.ID] = op
		h.Ops = append(h.Ops, op)
	case "ret":
		op := open[rec.ID]
		if op == nil {
			return fmt.Errorf("worker %s: a return of call %d, which it never made", worker, rec.ID)
		}
		op.Ret = &rec
		delete(open, rec.ID)
	case "commit":
		op := open[rec.ID]
		if op == nil {
			return fmt.Errorf("worker %s: a commit of call %d, which is not open", worker, rec.ID)
		}
		op.Commit = &rec
	case "done":
		h.Dones = append(h.Dones, Done{Worker: worker, Record: rec})
	case "lessor-commit":
		if h.LessorCommits == nil {
			h.LessorCommits = map[string][]int64{}
		}
		h.LessorCommits[worker] = append(h.LessorCommits[worker], rec.T)
	case "starved":
		if h.Starved == nil {
			h.Starved = map[string][]Starvation{}
		}
		h.Starved[worker] = append(h.Starved[worker], Starvation{Interval: Interval{From: rec.At, To: rec.Until}, Late: rec.Late})
	}
	return nil
}

// Linearizable checks the history of the authority's calls and the
// fenced transactions against Model, within timeout.
func (h *History) Linearizable(timeout time.Duration) (porcupine.CheckResult, porcupine.LinearizationInfo, int) {
	ops := h.porcupineOps()
	model := Model.ToModel()
	result, info := porcupine.CheckOperationsVerbose(model, ops, timeout)
	return result, info, len(ops)
}

// porcupineOps is the history as porcupine takes it. A failure before
// commit changed nothing and is left out; an operation whose outcome is
// unknown, or whose worker was killed during it, may take effect at any
// time after its call (porcupine's open-ended operation: it never
// returns). A transaction is open from the moment it was about to commit,
// its row's fate read from the database.
func (h *History) porcupineOps() []porcupine.Operation {
	rows := h.rowsByOp()
	var ops []porcupine.Operation
	var last int64 // the latest call or return that is known
	for i, op := range h.Ops {
		in := Input{Op: op.Call.Op, Resource: op.Call.Resource, Holder: op.Call.Holder,
			Epoch: op.Call.Epoch, Now: op.Call.Now, TTL: op.Call.TTL, ServerTime: op.Call.ServerTime}
		out := Output{Result: op.Result()}
		call, ret := op.Call.T, int64(math.MaxInt64)
		if op.Ret != nil {
			ret = op.Ret.T
			out.Last = op.Ret.Last
			if l := op.Ret.Lease; l != nil {
				out.Holder, out.Epoch, out.GrantedAt, out.ExpiresAt = l.Holder, l.Epoch, l.GrantedAt, l.ExpiresAt
			}
		}
		switch out.Result {
		case resultUnknown, resultKilled:
			ret = math.MaxInt64
		case resultOK, resultNone, resultHeld, resultBackwards, resultNotHolder, resultExpired, resultSuperseded:
		default:
			continue // nothing changed
		}
		switch op.Call.Op {
		case "acquire", "renew", "release", "tenure":
		case "holder", "read":
			if op.Ret == nil || out.Result == resultUnknown {
				continue // a read with no answer says nothing
			}
			out.Seq = op.Ret.Seq
		case "tx":
			if out.Result == resultSuperseded {
				break
			}
			row, committed := rows[op.Call.OpID]
			if !committed {
				continue // rolled back: its row is not there (checked apart)
			}
			in.Seq, out.Result = row.Seq, resultOK
			if op.Commit != nil {
				call = op.Commit.T
			}
		default:
			continue // the worker's own steps (wait, check, close): not the model's
		}
		ops = append(ops, porcupine.Operation{ClientId: i, Input: in, Call: call, Output: out, Return: ret})
		last = max(last, call)
		if ret != math.MaxInt64 {
			last = max(last, ret)
		}
	}
	// Last, what the databases hold once every worker has exited: after
	// every operation that returned, concurrent with those that never did.
	resources := map[string]bool{}
	for _, op := range ops {
		resources[op.Input.(Input).Resource] = true
	}
	for _, r := range slices.Sorted(maps.Keys(resources)) {
		ops = append(ops, porcupine.Operation{ClientId: len(h.Ops), Input: Input{Op: "final", Resource: r}, Call: last + 1,
			Output: Output{Result: resultOK, Epoch: h.Epochs[r], Fence: h.Fences[r], Seq: h.Counters[r]}, Return: last + 1})
	}
	return ops
}

func (h *History) rowsByOp() map[string]Row {
	rows := make(map[string]Row, len(h.Rows))
	for _, r := range h.Rows {
		rows[r.OpID] = r
	}
	return rows
}

// opsOf returns the operations named op with one of results (any, when
// none are named), in the order of their calls.
func (h *History) opsOf(op string, results ...string) []*Op {
	var got []*Op
	for _, o := range h.Ops {
		if o.Call.Op != op {
			continue
		}
		if len(results) == 0 {
			got = append(got, o)
			continue
		}
		for _, r := range results {
			if o.Result() == r {
				got = append(got, o)
				break
			}
		}
	}
	sort.SliceStable(got, func(i, j int) bool { return got[i].Call.T < got[j].Call.T })
	return got
}
