package history

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"

	"leases"
)

// Op is one operation a worker made: its call, its return (nil when the
// worker was killed during it) and, for a transaction, the moment it was
// about to send COMMIT. Killed is the controller's record of the kill
// that ended the worker during the call, when it wrote one.
type Op struct {
	Worker string
	Call   Record
	Ret    *Record
	Commit *Record
	// Sent is, for a tool call, when its request left the agent (after
	// the session's check, and any stop there).
	Sent   *Record
	Killed *Record
}

// Result is what the operation returned, or ResultKilled.
func (o *Op) Result() string {
	if o.Ret == nil {
		return ResultKilled
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
// pauses and kills, and the databases' final state. Each record of a
// worker is added with Add, or a worker's JSON lines with Read; the
// rest, the test fills in.
type History struct {
	Ops   []*Op
	Dones []Done
	// open are each worker's calls that have not returned yet, by id.
	open map[string]map[int64]*Op
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
	// Leases are the authority's lease rows, by resource, where the test
	// reads them whole (the stress tests); Records the fenced receiver's
	// records (absent: nothing stored), and Integrity what SQLite's
	// integrity_check said of the file ("" where the test asks nothing).
	Leases    map[string]LeaseRow
	Records   map[string]leases.Record
	Integrity string
	// KillEndsCalls says that a call's effects cannot outlive its
	// process: every store the workers write is a file that the process
	// writes itself (SQLite), and a "killed" record is written once the
	// process is gone. A call killed in flight then took effect before
	// its kill, if at all; elsewhere (a database server, an etcd
	// cluster) it may take effect at any time after its call.
	KillEndsCalls bool
	// Held are the guarded variant's COMMITs held with their backend
	// stopped, as the controller saw them when it continued the backend.
	Held []HeldCommit
	// LessorRows is, on etcd, every write of the lessor's lease rows in
	// the cluster's history, in revision order; nil elsewhere.
	LessorRows []RowWrite
	// Tools is what the tool servers' databases and files hold after a
	// run of the tool path; nil elsewhere.
	Tools *ToolState
}

// LeaseRow is a resource's lease row as the authority holds it
// afterwards; Holder is empty once the lease was released.
type LeaseRow struct {
	Epoch                          int64
	Holder                         string
	GrantedAt, ExpiresAt, LastTick int64
}

// RowWrite is one write of a resource's lease row, as the lessor's
// history holds it.
type RowWrite struct {
	Resource, Holder string
	Epoch            int64
	Held             bool
	Revision         int64
}

// Read adds the records a worker wrote on r, one JSON line each, to h.
// A last line cut short by a kill is dropped.
func (h *History) Read(worker string, r io.Reader) error {
	lines := bufio.NewScanner(r)
	lines.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for lines.Scan() {
		var rec Record
		if err := json.Unmarshal(lines.Bytes(), &rec); err != nil {
			continue // the last line, cut by a kill; an earlier one would be garbled and fail below
		}
		if err := h.Add(worker, rec); err != nil {
			return err
		}
	}
	return lines.Err()
}

// Add adds one record of worker to h: a call opens an operation, its
// return closes it, a kill closes every call still open.
func (h *History) Add(worker string, rec Record) error {
	if h.open == nil {
		h.open = map[string]map[int64]*Op{}
	}
	open := h.open[worker]
	if open == nil {
		open = map[int64]*Op{}
		h.open[worker] = open
	}
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
	case "sent":
		op := open[rec.ID]
		if op == nil {
			return fmt.Errorf("worker %s: call %d sent, and it is not open", worker, rec.ID)
		}
		op.Sent = &rec
	case "killed":
		for id, op := range open {
			op.Killed = &rec
			delete(open, id)
		}
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

// callsOf returns the operations named by any of names, in the order of
// their calls.
func (h *History) callsOf(names ...string) []*Op {
	var got []*Op
	for _, o := range h.Ops {
		if slices.Contains(names, o.Call.Op) {
			got = append(got, o)
		}
	}
	sort.SliceStable(got, func(i, j int) bool { return got[i].Call.T < got[j].Call.T })
	return got
}

// String names o for a violation: its worker, what it asked for, and
// the moments of its call and its return (or kill).
func (o *Op) String() string {
	c := o.Call
	s := fmt.Sprintf("%s's %s of %s", o.Worker, c.Op, c.Resource)
	switch c.Op {
	case "acquire":
		s += fmt.Sprintf(" at tick %d for %d", c.Now, c.TTL)
	case "renew":
		s += fmt.Sprintf(" epoch %d at tick %d for %d", c.Epoch, c.Now, c.TTL)
	case "release":
		s += fmt.Sprintf(" epoch %d at tick %d", c.Epoch, c.Now)
	case "write":
		s += fmt.Sprintf(" epoch %d %q", c.Epoch, c.Value)
	default:
		if c.Epoch != 0 {
			s += fmt.Sprintf(" epoch %d", c.Epoch)
		}
	}
	switch {
	case o.Ret != nil:
		return s + fmt.Sprintf(" (%d..%d)", c.T, o.Ret.T)
	case o.Killed != nil:
		return s + fmt.Sprintf(" (%d..killed at %d)", c.T, o.Killed.T)
	}
	return s + fmt.Sprintf(" (%d..)", c.T)
}
