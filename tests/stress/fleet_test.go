package stress

// The driver both tests share: a fleet of worker processes on one SQLite
// file, which the test starts, sends requests to, waits for, stops,
// continues, kills and restarts, recording every request and what became
// of it in the one history of package history.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"leases"
	"leases/evidence/experimenttest"
	"leases/evidence/worker"
	"leases/testkit/sqlitetest"
	"leases/testkit/testctx"
	"leases/tests/history"
)

// fleet is the test as the workers' controller, and the history of what
// they were asked and answered.
type fleet struct {
	t     *testing.T
	ctx   context.Context
	path  string
	procs []*process
	// event counts sends, replies and kills: the order in which the test
	// saw them, the history's clock. now is the tick the test's requests
	// carry.
	event, now int64
	h          *history.History
	tally      tally
	start      time.Time
}

// process is one worker as the controller knows it.
type process struct {
	name        string
	w           *worker.Worker
	rec         *history.Recorder // this incarnation's records
	incarnation int               // restarts so far
	call        *worker.Call
	op          *history.Op // the request in flight, nil when it waits for one
	id          int64       // op's id
	stopped     bool
	holdsLock   bool // it held SQLite's write lock when it was stopped
	killed      bool
}

// startFleet starts n workers, W0 to Wn-1, on a new database file; none
// outlives the test.
func startFleet(t *testing.T, n int) *fleet {
	t.Helper()
	f := &fleet{t: t, ctx: testctx.Context(t), path: sqlitetest.Path(t), h: &history.History{KillEndsCalls: true}}
	for i := range n {
		p := &process{name: fmt.Sprintf("W%d", i)}
		f.begin(p)
		f.procs = append(f.procs, p)
	}
	f.start = time.Now()
	return f
}

// begin starts p's process, with a recorder of its own.
func (f *fleet) begin(p *process) {
	p.w = experimenttest.StartWorker(f.t, f.ctx, p.name, f.path)
	p.rec = history.NewRecorder(func() (int64, int64) { f.event++; return f.event, f.now }, func(r history.Record) {
		if err := f.h.Add(p.name, r); err != nil {
			f.t.Fatal(err)
		}
	})
}

// The requests a holder makes, as the records of their calls.

func acquireOf(resource string, tick, ttl int64) history.Record {
	return history.Record{Op: "acquire", Resource: resource, Now: tick, TTL: ttl}
}

func renewalOf(held leases.Lease, tick, ttl int64) history.Record {
	return history.Record{Op: "renew", Resource: held.Resource, Holder: held.Holder, Epoch: held.Epoch, Now: tick, TTL: ttl, Lease: &held}
}

func releaseOf(held leases.Lease, tick int64) history.Record {
	return history.Record{Op: "release", Resource: held.Resource, Holder: held.Holder, Epoch: held.Epoch, Now: tick, Lease: &held}
}

func writeOf(resource string, epoch int64, value string) history.Record {
	return history.Record{Op: "write", Resource: resource, Epoch: epoch, Value: value}
}

func fenceOf(resource string, epoch int64) history.Record {
	return history.Record{Op: "fence", Resource: resource, Epoch: epoch}
}

func readOf(resource string) history.Record {
	return history.Record{Op: "read", Resource: resource}
}

// send sends the request req to p without waiting for its reply, and
// records its call.
func (f *fleet) send(p *process, req history.Record) {
	f.t.Helper()
	if req.Holder == "" {
		req.Holder = p.name
	}
	var call *worker.Call
	var err error
	switch req.Op {
	case "acquire":
		call, err = p.w.SendAcquire(req.Resource, req.Now, req.TTL)
	case "renew":
		call, err = p.w.SendRenew(*req.Lease, req.Now, req.TTL)
	case "release":
		call, err = p.w.SendRelease(*req.Lease, req.Now)
	case "write":
		call, err = p.w.SendWrite(leases.Fenced, req.Resource, req.Epoch, req.Value)
	case "fence":
		call, err = p.w.SendObserve(req.Resource, req.Epoch)
	case "read":
		call, err = p.w.SendRead(req.Resource)
	}
	if err != nil {
		f.t.Fatal(err)
	}
	p.id = p.rec.Call(req)
	p.call, p.op = call, f.h.Ops[len(f.h.Ops)-1] // the call just recorded
	f.tally.Operations++
}

// refusals are the results that are refusals of a request, an outcome
// rather than a failure: an acquire of a held lease, and any request
// that came too late (a renewal or release of a lease that expired or
// was superseded, or a tick older than the resource's last change, a
// paused worker's). Nothing changed.
var refusals = map[string][]string{
	"acquire": {history.ResultHeld, history.ResultBackwards},
	"renew":   {history.ResultBackwards, history.ResultExpired, history.ResultNotHolder},
	"release": {history.ResultBackwards, history.ResultExpired, history.ResultNotHolder},
}

// receive waits for p's reply and records it. A refusal is an outcome;
// any other error fails the test, a SQLITE_BUSY above all: it would mean
// a worker waited its whole busy timeout for a lock.
func (f *fleet) receive(p *process) *history.Op {
	f.t.Helper()
	answer, err := p.call.Wait(f.ctx)
	op := p.op
	ret := history.Record{Result: history.ResultOf(err), Err: history.ErrText(err)}
	switch {
	case err == nil:
		ret.Lease = answer.Lease
		if w := answer.Write; w != nil {
			ret.Outcome, ret.Stored = w.Outcome, &w.Record
		}
		if op.Call.Op == "read" {
			ret.Stored, ret.Found = &answer.Record, answer.Found
		}
	case !slices.Contains(refusals[op.Call.Op], ret.Result):
		f.t.Fatalf("%v: %v", op, err)
	}
	p.rec.Return(p.id, ret)
	p.call, p.op = nil, nil
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

// kill ends p with SIGKILL, stopped or not, and records the kill once
// the process is gone: its request in flight, if any, may or may not
// have committed, and can commit no more.
func (f *fleet) kill(p *process) {
	p.w.Kill()
	p.rec.Emit(history.Record{Kind: "killed"})
	f.tally.Kills++
	if p.stopped {
		f.tally.KillsStopped++
		f.tally.KillsHoldingLock += boolCount(p.holdsLock)
	}
	if p.op != nil {
		f.tally.Unknown++
	}
	p.call, p.op, p.killed = nil, nil, true
}

// restart starts a new process under the dead one's name.
func (f *fleet) restart(p *process) {
	*p = process{name: p.name, incarnation: p.incarnation + 1}
	f.begin(p)
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

// check reads the file the workers leave into the history, and fails the
// test with every violation that the history shows, checked by package
// history (the invariants, and porcupine against its model), label first
// (the seed that replays the run).
func (f *fleet) check(label string, resources []string) history.Verdict {
	f.t.Helper()
	readFile(f.t, f.ctx, f.path, resources, f.h)
	verdict := history.Verify(f.h, history.Options{Timeout: testctx.Bound(f.t) / 2})
	verdict.Report(f.t, label)
	f.t.Logf("%v", verdict)
	return verdict
}
