package stress

// The driver both tests share: a fleet of worker processes on one SQLite
// file, which the test starts, sends requests to, waits for, stops,
// continues, kills and restarts, recording every request and what became
// of it.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"leases"
	"leases/evidence/experimenttest"
	"leases/evidence/worker"
	"leases/testkit/sqlitetest"
	"leases/testkit/testctx"
)

// fleet is the test as the workers' controller, and the record of what
// they were asked and answered.
type fleet struct {
	t     *testing.T
	ctx   context.Context
	path  string
	procs []*process
	event int // counts sends, replies and kills: the order in which the test saw them
	ops   []*operation
	tally tally
	start time.Time
}

// process is one worker as the controller knows it.
type process struct {
	name        string
	w           *worker.Worker
	incarnation int // restarts so far
	call        *worker.Call
	op          *operation // the request in flight, nil when it waits for one
	stopped     bool
	holdsLock   bool // it held SQLite's write lock when it was stopped
	killed      bool
}

// startFleet starts n workers, W0 to Wn-1, on a new database file; none
// outlives the test.
func startFleet(t *testing.T, n int) *fleet {
	t.Helper()
	f := &fleet{t: t, ctx: testctx.Context(t), path: sqlitetest.Path(t)}
	for i := range n {
		name := fmt.Sprintf("W%d", i)
		f.procs = append(f.procs, &process{name: name, w: experimenttest.StartWorker(t, f.ctx, name, f.path)})
	}
	f.start = time.Now()
	return f
}

// send sends op to p without waiting for its reply.
func (f *fleet) send(p *process, op *operation) {
	f.t.Helper()
	var call *worker.Call
	var err error
	switch op.kind {
	case acquireOp:
		call, err = p.w.SendAcquire(op.resource, op.tick, op.ttl)
	case renewOp:
		call, err = p.w.SendRenew(op.held, op.tick, op.ttl)
	case releaseOp:
		call, err = p.w.SendRelease(op.held, op.tick)
	case writeOp:
		call, err = p.w.SendWrite(leases.Fenced, op.resource, op.epoch, op.value)
	case observeOp:
		call, err = p.w.SendObserve(op.resource, op.epoch)
	case readOp:
		call, err = p.w.SendRead(op.resource)
	}
	if err != nil {
		f.t.Fatal(err)
	}
	f.event++
	op.worker, op.sent = p.name, f.event
	p.call, p.op = call, op
	f.ops = append(f.ops, op)
	f.tally.Operations++
}

// receive waits for p's reply and records it. A refusal is an outcome;
// any other error fails the test, a SQLITE_BUSY above all: it would mean
// a worker waited its whole busy timeout for a lock.
func (f *fleet) receive(p *process) *operation {
	f.t.Helper()
	answer, err := p.call.Wait(f.ctx)
	f.event++
	op := p.op
	op.done = f.event
	p.call, p.op = nil, nil
	switch {
	case err == nil:
		op.lease, op.write, op.record, op.found = answer.Lease, answer.Write, answer.Record, answer.Found
	case op.kind == acquireOp && errors.Is(err, leases.ErrLeaseHeld):
		op.refused = true
	case isRejection(op.kind, err):
		op.rejected = err.Error()
	default:
		f.t.Fatalf("%v: %v", op, err)
	}
	f.tally.count(op)
	return op
}

// stop pauses p with SIGSTOP and notes whether it holds the write lock.
func (f *fleet) stop(p *process) {
	f.t.Helper()
	if err := p.w.Stop(f.ctx); err != nil {
		f.t.Fatal(err)
	}
	if state := threadStates(f.t, p.w.PID()); strings.Trim(state, "T") != "" {
		f.t.Fatalf("%s was stopped, yet its threads are in states %q", p.name, state)
	}
	p.stopped = true
	p.holdsLock = writeLockHolder(f.t, f.path) == p.w.PID()
}

// resume continues a stopped p with SIGCONT.
func (f *fleet) resume(p *process) {
	f.t.Helper()
	if err := p.w.Continue(); err != nil {
		f.t.Fatal(err)
	}
	p.stopped = false
}

// kill ends p with SIGKILL, stopped or not; its request in flight, if
// any, may or may not have committed.
func (f *fleet) kill(p *process) {
	p.w.Kill()
	f.event++
	f.tally.Kills++
	if p.stopped {
		f.tally.KillsStopped++
		f.tally.KillsHoldingLock += boolCount(p.holdsLock)
	}
	if p.op != nil {
		p.op.killed, p.op.done = true, f.event
		f.tally.Unknown++
	}
	p.killed = true
}

// restart starts a new process under the dead one's name.
func (f *fleet) restart(p *process) {
	*p = process{name: p.name, incarnation: p.incarnation + 1, w: experimenttest.StartWorker(f.t, f.ctx, p.name, f.path)}
	f.tally.Restarts++
}

// lockHolder returns the process that holds the write lock now, or nil.
func (f *fleet) lockHolder() *process {
	pid := writeLockHolder(f.t, f.path)
	for _, p := range f.procs {
		if pid != 0 && p.w.PID() == pid {
			return p
		}
	}
	return nil
}

// finish resumes every stopped worker, collects the replies still due,
// lets every worker exit, and stops the run's clock.
func (f *fleet) finish() {
	f.t.Helper()
	for _, p := range f.procs {
		if p.stopped {
			f.resume(p)
		}
	}
	for _, p := range f.procs {
		if p.op != nil {
			f.receive(p)
		}
	}
	for _, p := range f.procs {
		if err := p.w.Exit(f.ctx); err != nil {
			f.t.Fatal(err)
		}
	}
	f.tally.Wall = time.Since(f.start)
}

// check fails the test with every violation that the record and the
// file at the end show, label first (the seed that replays the run).
func (f *fleet) check(label string, final fileState, resources []string) {
	f.t.Helper()
	problems := checkRecord(f.ops, final, resources)
	if len(problems) == 0 {
		return
	}
	const shown = 20
	more := ""
	if len(problems) > shown {
		problems, more = problems[:shown], fmt.Sprintf("\n... and %d more", len(problems)-shown)
	}
	f.t.Fatalf("%s:\n%s%s", label, strings.Join(problems, "\n"), more)
}
