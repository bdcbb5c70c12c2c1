package experiment

import (
	"context"
	"errors"
	"fmt"

	"leases"
)

// PID is the worker's process id.
func (w *Worker) PID() int { return w.pid }

// Acquire asks the worker to acquire resource for itself (its name is the
// holder) at tick for ttl ticks. A refusal is an error that matches
// leases.ErrLeaseHeld.
func (w *Worker) Acquire(ctx context.Context, resource string, tick, ttl int64) (leases.Lease, error) {
	got, err := w.call(ctx, request{Op: opAcquire, Resource: resource, Holder: w.name, Tick: tick, TTL: ttl})
	if err != nil {
		return leases.Lease{}, err
	}
	if got.Lease == nil {
		return leases.Lease{}, refusal(got.Refused)
	}
	return *got.Lease, nil
}

// Write asks the worker to write value with epoch to a receiver in mode.
func (w *Worker) Write(ctx context.Context, mode leases.Mode, resource string, epoch int64, value string) (leases.WriteResult, error) {
	got, err := w.call(ctx, request{Op: opWrite, Resource: resource, Epoch: epoch, Value: value, Receiver: mode})
	if err != nil {
		return leases.WriteResult{}, err
	}
	if got.Write == nil {
		return leases.WriteResult{}, fmt.Errorf("worker %s sent no write result", w.name)
	}
	return *got.Write, nil
}

// Observe asks the worker to record epoch at the fenced receiver before it
// acts (see leases.Receiver.Observe).
func (w *Worker) Observe(ctx context.Context, resource string, epoch int64) (leases.WriteResult, error) {
	got, err := w.call(ctx, request{Op: opObserve, Resource: resource, Epoch: epoch})
	if err != nil {
		return leases.WriteResult{}, err
	}
	if got.Write == nil {
		return leases.WriteResult{}, fmt.Errorf("worker %s sent no observe result", w.name)
	}
	return *got.Write, nil
}

// Read asks the worker to read the fenced receiver's record of resource.
func (w *Worker) Read(ctx context.Context, resource string) (leases.Record, bool, error) {
	got, err := w.call(ctx, request{Op: opRead, Resource: resource})
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
		return leases.Lease{}, err
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

// ErrPausedInsideTransaction reports that a worker of a test binary is
// holding a transaction open on purpose, at the point the error names, and
// waits to be killed.
var ErrPausedInsideTransaction = errors.New("paused inside a transaction")

// refusal carries an authority's refusal across the process boundary and
// still matches leases.ErrLeaseHeld.
type refusal string

// Error is the authority's own message.
func (r refusal) Error() string { return string(r) }

// Is makes a refusal match leases.ErrLeaseHeld.
func (r refusal) Is(target error) bool { return target == leases.ErrLeaseHeld }
