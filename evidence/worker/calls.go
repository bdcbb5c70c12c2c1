package worker

import (
	"context"
	"errors"
	"fmt"

	"leases"
	"leases/evidence/backend"
)

// PID is the worker's process id.
func (w *Worker) PID() int { return w.pid }

// Name is the worker's name, which is also its holder name.
func (w *Worker) Name() string { return w.name }

// Acquire asks the worker to acquire resource for itself (its name is the
// holder) at tick for ttl ticks. A refusal is an error that matches
// leases.ErrLeaseHeld and says what the authority said.
func (w *Worker) Acquire(ctx context.Context, resource string, tick, ttl int64) (leases.Lease, error) {
	got, err := w.call(ctx, request{Op: opAcquire, Resource: resource, Holder: w.name, Tick: tick, TTL: ttl})
	if err != nil {
		return wouldBe(got, err), err
	}
	if got.Lease == nil {
		return leases.Lease{}, refused(got.Refused)
	}
	return *got.Lease, nil
}

// Write asks the worker to write value with epoch to a receiver in mode.
func (w *Worker) Write(ctx context.Context, mode leases.Mode, resource string, epoch int64, value string) (leases.WriteResult, error) {
	got, err := w.call(ctx, request{Op: opWrite, Resource: resource, Epoch: epoch, Value: value, Receiver: backend.Receiver(mode)})
	return w.writeResult(got, err, "write")
}

// GuardedWrite asks the worker to write value to the guarded receiver
// with held, its lease, at tick.
func (w *Worker) GuardedWrite(ctx context.Context, held leases.Lease, tick int64, value string) (leases.WriteResult, error) {
	got, err := w.call(ctx, request{Op: opGuardedWrite, Lease: &held, Tick: tick, Value: value})
	return w.writeResult(got, err, "guarded write")
}

// Fence asks the worker to raise the fenced receiver to epoch before it
// acts (see leases.Receiver.Fence).
func (w *Worker) Fence(ctx context.Context, resource string, epoch int64) (leases.WriteResult, error) {
	got, err := w.call(ctx, request{Op: opFence, Resource: resource, Epoch: epoch})
	return w.writeResult(got, err, "fence")
}

func (w *Worker) writeResult(got reply, err error, what string) (leases.WriteResult, error) {
	if err != nil {
		return leases.WriteResult{}, err
	}
	if got.Write == nil {
		return leases.WriteResult{}, fmt.Errorf("worker %s sent no %s result", w.name, what)
	}
	return *got.Write, nil
}

// Read asks the worker to read the record of resource at receiver.
func (w *Worker) Read(ctx context.Context, receiver backend.Receiver, resource string) (leases.Record, bool, error) {
	got, err := w.call(ctx, request{Op: opRead, Resource: resource, Receiver: receiver})
	if err != nil {
		return leases.Record{}, false, err
	}
	if got.Read == nil {
		return leases.Record{}, false, fmt.Errorf("worker %s sent no read result", w.name)
	}
	return got.Read.Record, got.Read.Found, nil
}

// Renew asks the worker to renew held at tick for ttl ticks.
func (w *Worker) Renew(ctx context.Context, held leases.Lease, tick, ttl int64) (leases.Lease, error) {
	got, err := w.call(ctx, request{Op: opRenew, Lease: &held, Tick: tick, TTL: ttl})
	if err != nil {
		return wouldBe(got, err), err
	}
	if got.Lease == nil {
		return leases.Lease{}, fmt.Errorf("worker %s sent no renewed lease", w.name)
	}
	return *got.Lease, nil
}

// Release asks the worker to release held at tick.
func (w *Worker) Release(ctx context.Context, held leases.Lease, tick int64) error {
	_, err := w.call(ctx, request{Op: opRelease, Lease: &held, Tick: tick})
	return err
}

// StartSession asks the worker to start a session on resource (package
// session) on a clock of its own, which starts at tick and moves only when
// Clock moves it: the controller stays the only clock.
func (w *Worker) StartSession(ctx context.Context, resource string, tick, ttl, margin int64) (leases.Lease, error) {
	got, err := w.call(ctx, request{Op: opSession, Resource: resource, Holder: w.name, Tick: tick, TTL: ttl, Margin: margin})
	if err != nil {
		return leases.Lease{}, err
	}
	if got.Lease == nil {
		return leases.Lease{}, refused(got.Refused)
	}
	return *got.Lease, nil
}

// Clock moves the worker's clock to tick, as a process finds its clock
// moved when it resumes after a pause, and lets the session act on it. It
// returns why the session has ended, or "" while it lives.
func (w *Worker) Clock(ctx context.Context, tick int64) (ended string, err error) {
	got, err := w.call(ctx, request{Op: opClock, Tick: tick})
	return got.Ended, err
}

// SessionWrite asks the worker to check its session and, if it still
// holds the lease, to write value with the session's epoch to a receiver
// in mode. When the session has ended, nothing is written and ended says
// why.
func (w *Worker) SessionWrite(ctx context.Context, receiver backend.Receiver, resource, value string) (result leases.WriteResult, ended string, err error) {
	got, err := w.call(ctx, request{Op: opSessionWrite, Resource: resource, Value: value, Receiver: receiver})
	if err != nil || got.Ended != "" {
		return leases.WriteResult{}, got.Ended, err
	}
	result, err = w.writeResult(got, nil, "session write")
	return result, "", err
}

// ErrPausedInsideTransaction reports that a worker of a test binary is
// holding a transaction open on purpose, at the point the error names, and
// waits to be killed.
var ErrPausedInsideTransaction = fmt.Errorf("paused inside a transaction")

// refused is an acquire's refusal, carried across the process boundary:
// the authority's own message, still matching leases.ErrLeaseHeld.
func refused(message string) error {
	return remoteError{msg: message, sentinels: []string{"lease-held"}}
}

// wouldBe is, as the authority gives it in the worker, the lease that a
// call with an unknown outcome would have granted; none otherwise.
func wouldBe(got reply, err error) leases.Lease {
	if got.Lease != nil && errors.Is(err, leases.ErrOutcomeUnknown) {
		return *got.Lease
	}
	return leases.Lease{}
}
