package experiment

import (
	"context"
	"errors"
	"fmt"

	"leases"
)

// scenarioRun drives the workers of one scenario through its schedule. The
// schedule reads as a script; the first failure is kept and every later
// step is skipped, so a script needs no error handling of its own.
type scenarioRun struct {
	ctx      context.Context
	def      scenarioDef
	opts     Options
	dbPath   string
	observer leases.Receiver
	workers  []*Worker
	leaseOf  map[string]leases.Lease // latest lease granted to each worker
	clock    int64
	highest  int64 // highest epoch granted so far
	steps    []Step
	err      error
}

// start launches a worker process; its name is also its holder name.
func (r *scenarioRun) start(name string) *Worker {
	if r.err != nil {
		return &Worker{name: name}
	}
	w, err := StartWorker(r.ctx, name, r.dbPath, func(pid int) {
		if r.opts.WorkerStarted != nil {
			r.opts.WorkerStarted(r.def.name, name, pid)
		}
	})
	if err != nil {
		r.err = err
		return &Worker{name: name}
	}
	r.workers = append(r.workers, w)
	return w
}

// at moves the controller's logical clock; it never runs backwards.
func (r *scenarioRun) at(tick int64) *scenarioRun {
	if r.err == nil && tick < r.clock {
		r.err = fmt.Errorf("schedule moves the clock back from tick %d to %d", r.clock, tick)
	}
	r.clock = tick
	return r
}

// acquire asks w to acquire the scenario's resource at the current tick.
func (r *scenarioRun) acquire(w *Worker) {
	if r.err != nil {
		return
	}
	step := Step{Actor: w.name, Operation: opAcquire, Tick: r.clock}
	lease, err := w.Acquire(r.ctx, r.def.params.Resource, r.clock, r.def.params.TTL)
	switch {
	case errors.Is(err, leases.ErrLeaseHeld):
		step.Outcome, step.Detail = outcomeRefused, err.Error()
	case err != nil:
		r.fail(step, err)
		return
	default:
		step.Outcome, step.Epoch, step.ExpiresAt = outcomeGranted, lease.Epoch, lease.ExpiresAt
		r.leaseOf[w.name] = lease
		r.highest = max(r.highest, lease.Epoch)
	}
	r.record(step)
}

// write asks w to write value to the receiver with the epoch of the lease
// it was last granted, whether or not that lease is still live: a paused
// holder does not know it has lost its lease.
func (r *scenarioRun) write(w *Worker, value string) {
	epoch := r.leaseOf[w.name].Epoch
	r.atReceiver(Step{Actor: w.name, Operation: opWrite, Tick: r.clock, Epoch: epoch, Value: value},
		func() (leases.WriteResult, error) {
			return w.Write(r.ctx, r.def.mode, r.def.params.Resource, epoch, value)
		})
}

// observe asks w to record its epoch at the receiver before it acts.
func (r *scenarioRun) observe(w *Worker) {
	epoch := r.leaseOf[w.name].Epoch
	r.atReceiver(Step{Actor: w.name, Operation: opObserve, Tick: r.clock, Epoch: epoch},
		func() (leases.WriteResult, error) { return w.Observe(r.ctx, r.def.params.Resource, epoch) })
}

// atReceiver runs one write or observe and records its outcome.
func (r *scenarioRun) atReceiver(step Step, op func() (leases.WriteResult, error)) {
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

// read asks w to read the receiver's record, as a new holder does before
// it acts on what is there.
func (r *scenarioRun) read(w *Worker) {
	if r.err != nil {
		return
	}
	step := Step{Actor: w.name, Operation: opRead, Tick: r.clock, Outcome: outcomeRead}
	if _, _, err := w.Read(r.ctx, r.def.params.Resource); err != nil {
		r.fail(step, err)
		return
	}
	r.record(step)
}

// exit asks w to exit and waits until its process has ended.
func (r *scenarioRun) exit(w *Worker) {
	if r.err != nil {
		return
	}
	step := Step{Actor: w.name, Operation: opExit, Tick: r.clock, Outcome: outcomeExited}
	if err := w.Exit(r.ctx); err != nil {
		r.fail(step, err)
		return
	}
	r.record(step)
}

// fail keeps the first failure, naming the step it happened in.
func (r *scenarioRun) fail(step Step, err error) {
	r.err = fmt.Errorf("%s: %w", describe(len(r.steps)+1, step), err)
}

// record completes a step with the authority's highest epoch and the
// receiver's record as they are now.
func (r *scenarioRun) record(step Step) {
	rec, found, err := r.observer.Read(r.ctx, r.def.params.Resource)
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
func (r *scenarioRun) killRemaining() {
	for _, w := range r.workers {
		w.Kill()
	}
}

func describe(n int, s Step) string {
	what := fmt.Sprintf("step %d (%s %s at tick %d", n, s.Actor, s.Operation, s.Tick)
	if s.Operation == opWrite || s.Operation == opObserve {
		what += fmt.Sprintf(" with epoch %d", s.Epoch)
	}
	return what + ")"
}
