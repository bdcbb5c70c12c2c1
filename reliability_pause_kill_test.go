package leases_test

// Pauses and crashes at random moments: eight worker processes contend for
// three resources on one SQLite file while the test, their only clock,
// stops them with SIGSTOP and kills them with SIGKILL. The checker is in
// reliability_pause_kill_check_test.go. Not among the contract's 17 tests.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"leases"
	"leases/internal/experiment/worker"
)

// The run's size and seed come from the environment: LEASES_PAUSE_KILL is
// a number of operations or a duration (LEASES_PAUSE_KILL=90s for a soak),
// LEASES_PAUSE_KILL_SEED replays a run's schedule of faults and choices.
const (
	pauseKillEnv     = "LEASES_PAUSE_KILL"
	pauseKillSeedEnv = "LEASES_PAUSE_KILL_SEED"
	pkShortRun       = 400 // operations in the run that is part of go test ./...
	pkWorkers        = 8
)

var pkResources = []string{"r0", "r1", "r2"}

// How often each fault is drawn per step; a step sends one request to
// every worker that is not paused.
const (
	pkStopChance  = 0.6  // a worker stopped between two sends, resumed before any reply is awaited
	pkKillChance  = 0.12 // a worker killed with its request in flight, and restarted
	pkPauseChance = 0.12 // an idle worker stopped for 1 to 5 steps while the others go on
)

func TestPauseAndKill(t *testing.T) {
	skipWithoutStop(t)
	skipWithoutProcfs(t)
	ctx := testContext(t)
	budget := pauseKillBudget(t)
	seed := rand.Uint64()
	if s := os.Getenv(pauseKillSeedEnv); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("%s=%q: want an unsigned integer", pauseKillSeedEnv, s)
		}
	}
	t.Logf("seed %d; replay with %s=%d", seed, pauseKillSeedEnv, seed)

	r := &pkRun{
		t: t, ctx: ctx, path: tempDBPath(t),
		schedule: rand.New(rand.NewPCG(seed, 1)),
		choices:  rand.New(rand.NewPCG(seed, 2)),
	}
	start := time.Now()
	for i := range pkWorkers {
		r.actors = append(r.actors, &pkActor{name: fmt.Sprintf("W%d", i), w: startWorker(t, ctx, fmt.Sprintf("W%d", i), r.path)})
	}
	for !budget.spent(r.stats.Operations, time.Since(start)) {
		r.step()
	}
	r.finish()
	r.stats.Wall = time.Since(start)

	final := readFinalRows(t, ctx, r.path)
	s := r.stats
	// Every epoch the authority's rows count up to and no reply carried
	// went to a killed acquire.
	lost := -s.Grants
	for _, row := range final.rows {
		lost += int(row.epoch)
	}
	t.Logf("seed %d, %d steps to tick %d, %v: %d operations (%d acquires: %d grants, %d refused, %d epochs taken by killed acquires; "+
		"%d renewals, %d releases, %d refused as expired or superseded, %d refused as late (tick backwards); "+
		"writes %d accepted, %d stale, %d replays, %d conflicts; %d observes; %d reads); "+
		"%d stops between sends (%d caught the worker holding the write lock), %d long pauses; "+
		"%d kills (%d of a stopped worker, %d of them holding the write lock), %d restarts, %d operations left with an unknown outcome; "+
		"replay with %s=%d %s=%d",
		seed, s.Steps, r.now, s.Wall.Round(time.Millisecond), s.Operations, s.Acquires, s.Grants, s.Refusals, lost, s.Renewals, s.Releases, s.Rejections-s.Late, s.Late,
		s.Accepted, s.Stale, s.Replays, s.Conflicts, s.Observes, s.Reads,
		s.Stops, s.StopsHoldingLock, s.Pauses, s.Kills, s.KillsStopped, s.KillsHoldingLock, s.Restarts, s.Unknown,
		pauseKillSeedEnv, seed, pauseKillEnv, s.Operations)
	if problems := checkPauseKill(r.ops, final); len(problems) > 0 {
		const shown = 20
		more := ""
		if len(problems) > shown {
			problems, more = problems[:shown], fmt.Sprintf("\n... and %d more", len(problems)-shown)
		}
		t.Fatalf("seed %d:\n%s%s", seed, strings.Join(problems, "\n"), more)
	}
	if s.Grants == 0 || s.Stale == 0 || s.Stops == 0 || s.Kills == 0 || s.Restarts != s.Kills {
		t.Errorf("the run did not exercise what it is for: %+v", s)
	}
}

// pkBudget is how long a run goes on: a number of operations, or, for a
// soak, a wall-clock duration.
type pkBudget struct {
	ops  int
	wall time.Duration
}

func pauseKillBudget(t *testing.T) pkBudget {
	t.Helper()
	v := os.Getenv(pauseKillEnv)
	if v == "" {
		return pkBudget{ops: pkShortRun}
	}
	if n, err := strconv.Atoi(v); err == nil && n > 0 {
		return pkBudget{ops: n}
	}
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return pkBudget{wall: d}
	}
	t.Fatalf("%s=%q: want a number of operations or a duration such as 90s", pauseKillEnv, v)
	return pkBudget{}
}

func (b pkBudget) spent(ops int, elapsed time.Duration) bool {
	if b.wall > 0 {
		return elapsed >= b.wall
	}
	return ops >= b.ops
}

// pkRun is the test as the workers' controller and clock.
type pkRun struct {
	t    *testing.T
	ctx  context.Context
	path string
	// schedule draws the clock's steps and the faults, choices what the
	// workers ask for. Each draws the same amount every step whatever the
	// replies were, so a seed replays the same faults at the same moments.
	schedule, choices *rand.Rand
	actors            []*pkActor
	now               int64 // the clock: every request carries it
	event             int   // counts sends, replies and kills: the order in which the test saw them
	ops               []*pkOp
	stats             pkStats
}

// pkStats is what a run did, for the log and the README.
type pkStats struct {
	Steps, Operations                     int
	Acquires, Grants, Refusals            int
	Renewals, Releases, Rejections, Late  int
	Accepted, Stale, Replays, Conflicts   int
	Observes, Reads                       int
	Stops, StopsHoldingLock, Pauses       int
	Kills, KillsStopped, KillsHoldingLock int
	Restarts, Unknown                     int
	Wall                                  time.Duration
}

// pkFaults is one step's schedule, drawn in full every step.
type pkFaults struct {
	advance          int64
	order, replies   []int // the order of the sends and of the replies awaited
	stop, stopAfter  int   // the worker stopped after that many sends; -1 for none
	stopHolder       bool  // stop the worker that holds the write lock then instead, if any
	kill             int   // the worker killed; -1 for none
	killStopped      bool  // kill the stopped worker instead, while it is stopped, if there is one
	pause, pauseFor  int   // the worker paused at the end of the step, for that many steps; -1 for none
	queue            bool  // and sent its next request while it is paused
	stopP, killP, pP float64
}

func (r *pkRun) drawFaults() pkFaults {
	g := r.schedule
	f := pkFaults{
		advance: []int64{0, 1, 1, 1, 1, 2}[g.IntN(6)],
		order:   g.Perm(pkWorkers), replies: g.Perm(pkWorkers),
		stop: g.IntN(pkWorkers), stopAfter: g.IntN(pkWorkers + 1), stopHolder: g.IntN(4) != 0,
		kill: g.IntN(pkWorkers), killStopped: g.IntN(2) == 0,
		pause: g.IntN(pkWorkers), pauseFor: 1 + g.IntN(5), queue: g.IntN(4) != 0,
		stopP: g.Float64(), killP: g.Float64(), pP: g.Float64(),
	}
	if f.stopP >= pkStopChance {
		f.stop = -1
	}
	if f.killP >= pkKillChance {
		f.kill = -1
	}
	if f.pP >= pkPauseChance {
		f.pause = -1
	}
	return f
}

func (r *pkRun) drawChoice() pkChoice {
	g := r.choices
	return pkChoice{p: g.Float64(), resource: g.IntN(len(pkResources)), ttl: 1 + g.Int64N(4), pick: g.IntN(1 << 20)}
}

// step advances the clock and sends one request to every worker that is
// not paused, stopping one of them between two sends at random and
// resuming it before any reply is awaited: a stopped worker may hold the
// write lock, and the others' transactions queue behind it until it runs
// again. A worker paused for longer is stopped only while it waits for a
// request (it then holds no lock, which the test checks), so the others
// go on around it.
func (r *pkRun) step() {
	r.stats.Steps++
	f := r.drawFaults()
	r.now += f.advance
	plans := make([]*pkOp, pkWorkers)
	for i, a := range r.actors {
		c := r.drawChoice()
		if !a.stopped && a.op == nil {
			plans[i] = a.next(r.now, c)
		}
	}
	queued := r.drawChoice()

	var stopped *pkActor
	for k, i := range append(f.order, -1) {
		if k == f.stopAfter && f.stop >= 0 && f.stopHolder {
			f.stop = r.lockHolder(f.stop)
		}
		if k == f.stopAfter && f.stop >= 0 && !r.actors[f.stop].stopped {
			stopped = r.actors[f.stop]
			r.stop(stopped)
			r.stats.Stops++
			if stopped.holdsLock {
				r.stats.StopsHoldingLock++
			}
		}
		if i >= 0 && plans[i] != nil {
			r.send(r.actors[i], plans[i])
		}
	}
	// Nobody's reply is awaited before the stopped worker runs again or
	// is dead. The first stop that catches a worker holding the write
	// lock kills it, to show that its death releases the lock: the others'
	// requests, queued behind it, then go through.
	var victim *pkActor
	switch {
	case stopped != nil && (f.kill >= 0 && f.killStopped || stopped.holdsLock && r.stats.KillsHoldingLock == 0):
		victim = stopped
	case f.kill >= 0:
		victim = r.actors[f.kill]
	}
	if victim != nil && victim.stopped {
		r.kill(victim)
	}
	if stopped != nil && !stopped.killed {
		r.resume(stopped)
	}
	for _, a := range r.actors {
		if a.wake == r.stats.Steps && !a.killed {
			r.resume(a)
		}
	}
	for _, i := range f.replies {
		a := r.actors[i]
		switch {
		case a == victim && !a.killed:
			r.kill(a) // its reply may be on its way, or its transaction not yet begun
		case a.op != nil && !a.stopped && !a.killed:
			r.receive(a)
		}
	}
	for _, a := range r.actors {
		if a.killed {
			r.restart(a)
		}
	}
	if f.pause >= 0 {
		if a := r.actors[f.pause]; !a.stopped && a.op == nil {
			r.pause(a, f.pauseFor, f.queue, queued)
		}
	}
}

// lockHolder returns the index of the worker that holds the write lock
// now, or otherwise.
func (r *pkRun) lockHolder(otherwise int) int {
	pid := writeLockHolder(r.t, r.path)
	for i, a := range r.actors {
		if pid != 0 && a.w.PID() == pid {
			return i
		}
	}
	return otherwise
}

// pause stops an idle worker for steps steps; with queue, its next
// request waits in its pipe meanwhile, stamped with the tick at which it
// was sent, as a paused process's request is.
func (r *pkRun) pause(a *pkActor, steps int, queue bool, c pkChoice) {
	r.stop(a)
	if a.holdsLock {
		r.t.Fatalf("%s waited for a request and still held the write lock when it was stopped", a.name)
	}
	r.stats.Pauses++
	a.wake = r.stats.Steps + steps
	if queue {
		r.send(a, a.next(r.now, c))
	}
}

// finish resumes every paused worker, collects the replies still due, and
// lets every worker exit.
func (r *pkRun) finish() {
	for _, a := range r.actors {
		if a.stopped {
			r.resume(a)
		}
	}
	for _, a := range r.actors {
		if a.op != nil {
			r.receive(a)
		}
	}
	for _, a := range r.actors {
		if err := a.w.Exit(r.ctx); err != nil {
			r.t.Fatal(err)
		}
	}
}

func (r *pkRun) stop(a *pkActor) {
	r.t.Helper()
	if err := a.w.Stop(r.ctx); err != nil {
		r.t.Fatal(err)
	}
	if state := threadStates(r.t, a.w.PID()); strings.Trim(state, "T") != "" {
		r.t.Fatalf("%s was stopped, yet its threads are in states %q", a.name, state)
	}
	a.stopped = true
	a.holdsLock = writeLockHolder(r.t, r.path) == a.w.PID()
}

func (r *pkRun) resume(a *pkActor) {
	r.t.Helper()
	if err := a.w.Continue(); err != nil {
		r.t.Fatal(err)
	}
	a.stopped, a.wake = false, 0
}

// kill ends a worker with SIGKILL, stopped or not; its request in flight,
// if any, may or may not have committed.
func (r *pkRun) kill(a *pkActor) {
	a.w.Kill()
	r.event++
	r.stats.Kills++
	if a.stopped {
		r.stats.KillsStopped++
		if a.holdsLock {
			r.stats.KillsHoldingLock++
		}
	}
	if a.op != nil {
		a.op.killed, a.op.done = true, r.event
		r.stats.Unknown++
	}
	a.killed = true
}

// restart starts a new process under the dead one's name. It knows
// nothing of the old one's lease.
func (r *pkRun) restart(a *pkActor) {
	*a = pkActor{name: a.name, incarnation: a.incarnation + 1, w: startWorker(r.t, r.ctx, a.name, r.path)}
	r.stats.Restarts++
}

func (r *pkRun) send(a *pkActor, op *pkOp) {
	r.t.Helper()
	var call *worker.Call
	var err error
	switch op.kind {
	case pkAcquire:
		call, err = a.w.SendAcquire(op.resource, op.tick, op.ttl)
	case pkRenew:
		call, err = a.w.SendRenew(op.held, op.tick, op.ttl)
	case pkRelease:
		call, err = a.w.SendRelease(op.held, op.tick)
	case pkWrite:
		call, err = a.w.SendWrite(leases.Fenced, op.resource, op.epoch, op.value)
	case pkObserve:
		call, err = a.w.SendObserve(op.resource, op.epoch)
	case pkRead:
		call, err = a.w.SendRead(op.resource)
	}
	if err != nil {
		r.t.Fatal(err)
	}
	r.event++
	op.worker, op.sent = a.name, r.event
	a.call, a.op = call, op
	r.ops = append(r.ops, op)
	r.stats.Operations++
}

// receive waits for a worker's reply and records it. A refusal is an
// outcome; any other error fails the test, a SQLITE_BUSY above all: it
// would mean a worker waited its whole busy timeout for a lock.
func (r *pkRun) receive(a *pkActor) {
	r.t.Helper()
	answer, err := a.call.Wait(r.ctx)
	r.event++
	op := a.op
	op.done = r.event
	a.call, a.op = nil, nil
	switch {
	case err == nil:
		op.lease, op.write, op.record, op.found = answer.Lease, answer.Write, answer.Record, answer.Found
	case op.kind == pkAcquire && errors.Is(err, leases.ErrLeaseHeld):
		op.refused = true
	case isRejection(op.kind, err):
		op.rejected = err.Error()
	default:
		r.t.Fatalf("%v: %v", op, err)
	}
	r.count(op)
	a.learn(op)
}

// isRejection reports whether err is the authority refusing a request
// that came too late: a renewal or release of a lease that expired or was
// superseded, or any request stamped with a tick older than the
// resource's last change (a paused worker's). Nothing changed.
func isRejection(kind string, err error) bool {
	msg := err.Error()
	if strings.Contains(msg, leases.ErrTickBackwards.Error()) {
		return kind == pkAcquire || kind == pkRenew || kind == pkRelease
	}
	return (kind == pkRenew || kind == pkRelease) &&
		(strings.Contains(msg, leases.ErrLeaseExpired.Error()) || strings.Contains(msg, leases.ErrNotHolder.Error()))
}

func (r *pkRun) count(op *pkOp) {
	s := &r.stats
	switch op.kind {
	case pkAcquire:
		s.Acquires++
		switch {
		case op.refused:
			s.Refusals++
		case op.rejected == "":
			s.Grants++
		}
	case pkRenew:
		if op.rejected == "" {
			s.Renewals++
		}
	case pkRelease:
		if op.rejected == "" {
			s.Releases++
		}
	case pkWrite:
		switch op.write.Outcome {
		case leases.Accepted:
			s.Accepted++
		case leases.Stale:
			s.Stale++
		case leases.Replay:
			s.Replays++
		case leases.Conflict:
			s.Conflicts++
		}
	case pkObserve:
		s.Observes++
	case pkRead:
		s.Reads++
	}
	if op.rejected != "" {
		s.Rejections++
	}
	if strings.Contains(op.rejected, leases.ErrTickBackwards.Error()) {
		s.Late++
	}
}
