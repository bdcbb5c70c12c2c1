package scenario

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"leases"
	"leases/evidence/backend"
	"leases/evidence/worker"
)

// script drives the workers of one scenario through its schedule. The
// schedule reads as a script; the first failure is kept and every later
// step is skipped, so a script needs no error handling of its own.
type script struct {
	ctx         context.Context
	def         Def
	backendName string // the backend's name, for the workers
	sandbox     backend.Sandbox
	opts        Options
	observer    func(context.Context, string) (leases.Record, bool, error)
	workers     []*worker.Worker
	leaseOf     map[string]leases.Lease // latest lease granted to each worker
	clock       int64
	highest     int64 // highest epoch granted so far
	steps       []Step
	err         error
	startedMu   sync.Mutex  // held while WorkerStarted runs
	tool        *toolServer // the tool server, once started
}

// actor is a worker as a schedule names it: a name, and the process once
// it has started.
type actor struct {
	name string
	w    *worker.Worker
}

// startPair launches two worker processes at once, named first and
// second (each name is also the worker's holder name), and returns once
// both have announced themselves. At once: a worker's start is this
// binary's, tens of milliseconds of CPU each, and one after the other
// they were half of a scenario's time. Should either fail, the script
// keeps the first's error (else the second's), and ends the other with
// the rest.
func (r *script) startPair(first, second string) (*actor, *actor) {
	a, b := &actor{name: first}, &actor{name: second}
	if r.err != nil {
		return a, b
	}
	var errs [2]error
	var wg sync.WaitGroup
	for i, x := range []*actor{a, b} {
		wg.Go(func() { x.w, errs[i] = r.launch(x.name) })
	}
	wg.Wait()
	for i, x := range []*actor{a, b} {
		if x.w != nil {
			r.workers = append(r.workers, x.w)
		}
		if errs[i] != nil && r.err == nil {
			r.err = errs[i]
		}
	}
	return a, b
}

// launch starts the worker called name. Its pid goes to the
// WorkerStarted callback, one call at a time.
func (r *script) launch(name string) (*worker.Worker, error) {
	start := worker.Start
	if r.opts.Workers != nil {
		start = r.opts.Workers.Start
	}
	return start(r.ctx, name, worker.Options{
		Backend: r.backendName, Address: r.sandbox.Address(), Started: r.started(name),
	})
}

// started is the Started callback of the worker called name: it passes
// the pid to WorkerStarted, one call at a time.
func (r *script) started(name string) func(pid int) {
	return func(pid int) {
		if r.opts.WorkerStarted != nil {
			r.startedMu.Lock()
			defer r.startedMu.Unlock()
			r.opts.WorkerStarted(r.def.Name, name, pid)
		}
	}
}

// at moves the controller's logical clock; it never runs backwards.
func (r *script) at(tick int64) *script {
	if r.err == nil && tick < r.clock {
		r.err = fmt.Errorf("schedule moves the clock back from tick %d to %d", r.clock, tick)
	}
	r.clock = tick
	return r
}

// acquire asks a to acquire the scenario's resource at the current tick.
func (r *script) acquire(a *actor) {
	if r.err != nil {
		return
	}
	step := Step{Actor: a.name, Operation: OpAcquire, Tick: r.clock}
	r.granted(a, step, func() (leases.Lease, error) {
		return a.w.Acquire(r.ctx, r.def.Params.Resource, r.clock, r.def.Params.TTL)
	})
}

// startSession asks a to hold the scenario's resource with a session
// (package session) on a clock of its own, set to the current tick.
func (r *script) startSession(a *actor, margin int64) {
	if r.err != nil {
		return
	}
	step := Step{Actor: a.name, Operation: OpSession, Tick: r.clock}
	r.granted(a, step, func() (leases.Lease, error) {
		return a.w.StartSession(r.ctx, r.def.Params.Resource, r.clock, r.def.Params.TTL, margin)
	})
}

// granted records an acquire or a session's start: granted, or refused.
func (r *script) granted(a *actor, step Step, grant func() (leases.Lease, error)) {
	lease, err := grant()
	switch {
	case errors.Is(err, leases.ErrLeaseHeld):
		step.Outcome, step.Detail = OutcomeRefused, err.Error()
	case err != nil:
		r.fail(step, err)
		return
	default:
		step.Outcome, step.Epoch, step.ExpiresAt = OutcomeGranted, lease.Epoch, lease.ExpiresAt
		r.leaseOf[a.name] = lease
		r.highest = max(r.highest, lease.Epoch)
	}
	r.record(step)
}

// write asks a to write value to the receiver with the epoch of the lease
// it was last granted, whether or not that lease is still live: a paused
// holder does not know it has lost its lease. A guarded receiver gets the
// whole lease and the current tick.
func (r *script) write(a *actor, value string) {
	lease := r.leaseOf[a.name]
	r.atReceiver(Step{Actor: a.name, Operation: OpWrite, Tick: r.clock, Epoch: lease.Epoch, Value: value},
		func() (leases.WriteResult, error) {
			mode, ok := r.def.Receiver.Mode()
			if !ok {
				return a.w.GuardedWrite(r.ctx, lease, r.clock, value)
			}
			return a.w.Write(r.ctx, mode, r.def.Params.Resource, lease.Epoch, value)
		})
}

// observe asks a to record its epoch at the receiver before it acts.
func (r *script) observe(a *actor) {
	epoch := r.leaseOf[a.name].Epoch
	r.atReceiver(Step{Actor: a.name, Operation: OpFence, Tick: r.clock, Epoch: epoch},
		func() (leases.WriteResult, error) { return a.w.Fence(r.ctx, r.def.Params.Resource, epoch) })
}

// atReceiver runs one write or observe and records its outcome.
func (r *script) atReceiver(step Step, op func() (leases.WriteResult, error)) {
	if r.err != nil {
		return
	}
	result, err := op()
	if err != nil {
		r.fail(step, err)
		return
	}
	step.Outcome = string(result.Outcome)
	r.record(step)
}

// read asks a to read the receiver's record, as a new holder does before
// it acts on what is there.
func (r *script) read(a *actor) {
	if r.err != nil {
		return
	}
	step := Step{Actor: a.name, Operation: OpRead, Tick: r.clock, Outcome: OutcomeRead}
	if _, _, err := a.w.Read(r.ctx, r.def.Receiver, r.def.Params.Resource); err != nil {
		r.fail(step, err)
		return
	}
	r.record(step)
}

// pause stops a's process with SIGSTOP, as a long garbage collection or a
// descheduled machine does, and returns once every thread has stopped.
func (r *script) pause(a *actor) {
	if r.err != nil {
		return
	}
	step := Step{Actor: a.name, Operation: OpPause, Tick: r.clock, Outcome: OutcomeStopped}
	if err := a.w.Stop(r.ctx); err != nil {
		r.fail(step, err)
		return
	}
	r.record(step)
}

// resume continues a's process with SIGCONT and moves its clock to the
// current tick, as a paused process finds the time moved on when it runs
// again. The step's outcome says whether a's session survived that.
func (r *script) resume(a *actor) {
	if r.err != nil {
		return
	}
	step := Step{Actor: a.name, Operation: OpResume, Tick: r.clock}
	if err := a.w.Continue(); err != nil {
		r.fail(step, err)
		return
	}
	ended, err := a.w.Clock(r.ctx, r.clock)
	if err != nil {
		r.fail(step, err)
		return
	}
	step.Outcome = OutcomeHolding
	if ended != "" {
		step.Outcome, step.Detail = OutcomeEnded, ended
	}
	r.record(step)
}

// sessionWrite asks a to check its session and write value with the
// session's epoch only if it still holds the lease.
func (r *script) sessionWrite(a *actor, value string) {
	if r.err != nil {
		return
	}
	step := Step{Actor: a.name, Operation: OpWrite, Tick: r.clock, Epoch: r.leaseOf[a.name].Epoch, Value: value}
	result, ended, err := a.w.SessionWrite(r.ctx, r.def.Receiver, r.def.Params.Resource, value)
	switch {
	case err != nil:
		r.fail(step, err)
		return
	case ended != "":
		step.Outcome, step.Detail = OutcomeNotSent, ended
	default:
		step.Outcome = string(result.Outcome)
	}
	r.record(step)
}

// stopLeader stops the cluster's leader member, as a crash would.
func (r *script) stopLeader() {
	r.onCluster(OpStopLeader, OutcomeStopped, func(c backend.Cluster) error { return c.StopLeader(r.ctx) })
}

// restartMember restarts the stopped member and waits until it has caught
// up.
func (r *script) restartMember() {
	r.onCluster(OpRestart, OutcomeRestarted, func(c backend.Cluster) error { return c.RestartStopped(r.ctx) })
}

// readEachMember reads the authority's lease and the receiver's record
// through each member alone, one step per member.
func (r *script) readEachMember() {
	if r.err != nil {
		return
	}
	c, ok := r.cluster()
	if !ok {
		return
	}
	for i := range c.Members() {
		if r.err != nil {
			return
		}
		step := Step{Actor: ClusterActor, Operation: OpReadMember, Tick: r.clock, Outcome: OutcomeRead,
			Detail: fmt.Sprintf("member %d", i+1)}
		store, err := c.OpenMember(r.ctx, i)
		if err != nil {
			r.fail(step, err)
			return
		}
		step.Epoch, step.ReceiverAfter, err = r.readThrough(store)
		step.HighestEpochGranted = r.highest
		if closeErr := store.Close(); err == nil {
			err = closeErr
		}
		if err != nil {
			r.fail(step, err)
			return
		}
		r.steps = append(r.steps, step)
	}
}

// readThrough reads the epoch of the authority's row and the receiver's
// record through store.
func (r *script) readThrough(store backend.Store) (int64, *leases.Record, error) {
	// The epoch of the last lease is what a holder query at the tick of
	// its grant shows; the row keeps it after the lease ends too.
	epoch := int64(0)
	if lease, ok := r.leaseOf[r.lastHolder()]; ok {
		held, live, err := store.Authority().Lease(r.ctx, r.def.Params.Resource, lease.GrantedAt)
		if err != nil {
			return 0, nil, err
		}
		if live {
			epoch = held.Epoch
		}
	}
	rec, found, err := backend.Reader(store, r.def.Receiver)(r.ctx, r.def.Params.Resource)
	return epoch, recordOrNil(rec, found), err
}

// lastHolder is the worker granted the highest epoch.
func (r *script) lastHolder() string {
	for name, lease := range r.leaseOf {
		if lease.Epoch == r.highest {
			return name
		}
	}
	return ""
}

// cluster is the scenario's sandbox as a cluster; where it is not one, the
// script fails.
func (r *script) cluster() (backend.Cluster, bool) {
	c, ok := r.sandbox.(backend.Cluster)
	if !ok {
		r.err = fmt.Errorf("scenario %s needs a replicated backend", r.def.Name)
	}
	return c, ok
}

func (r *script) onCluster(operation, outcome string, do func(backend.Cluster) error) {
	if r.err != nil {
		return
	}
	step := Step{Actor: ClusterActor, Operation: operation, Tick: r.clock, Outcome: outcome}
	c, ok := r.cluster()
	if !ok {
		return
	}
	if err := do(c); err != nil {
		r.fail(step, err)
		return
	}
	r.record(step)
}

// exit asks a to exit and waits until its process has ended.
func (r *script) exit(a *actor) {
	if r.err != nil {
		return
	}
	step := Step{Actor: a.name, Operation: OpExit, Tick: r.clock, Outcome: OutcomeExited}
	if err := a.w.Exit(r.ctx); err != nil {
		r.fail(step, err)
		return
	}
	r.record(step)
}

// fail keeps the first failure, naming the step it happened in.
func (r *script) fail(step Step, err error) {
	r.err = fmt.Errorf("%s: %w", describe(len(r.steps)+1, step), err)
}

// record completes a step with the authority's highest epoch and the
// receiver's record as they are now.
func (r *script) record(step Step) {
	rec, found, err := r.observer(r.ctx, r.def.Params.Resource)
	if err != nil {
		r.fail(step, fmt.Errorf("reading the receiver: %w", err))
		return
	}
	step.HighestEpochGranted = r.highest
	step.ReceiverAfter = recordOrNil(rec, found)
	r.steps = append(r.steps, step)
}

// killRemaining ends every worker that has not exited, so no child outlives
// a failed run.
func (r *script) killRemaining() {
	for _, w := range r.workers {
		w.Kill()
	}
}

func describe(n int, s Step) string {
	what := fmt.Sprintf("step %d (%s %s at tick %d", n, s.Actor, s.Operation, s.Tick)
	if s.Operation == OpWrite || s.Operation == OpFence {
		what += fmt.Sprintf(" with epoch %d", s.Epoch)
	}
	return what + ")"
}
