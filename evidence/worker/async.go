package worker

import (
	"context"
	"encoding/json"
	"fmt"

	"leases"
	"leases/evidence/backend"
)

// Call is a request sent to a worker whose reply has not been read yet.
// Sending and waiting are separate steps so that a controller can stop one
// worker, send requests to the others and resume the stopped one before it
// waits for anybody: a stopped worker may hold SQLite's write lock, and
// waiting for another worker's reply while it is stopped would end in that
// worker's busy timeout.
type Call struct {
	w  *Worker
	op string
}

// Answer is a worker's reply to a Call; which field is set depends on the
// call: Lease for an acquire or a renewal, Write for a write or an observe,
// Record and Found for a read, nothing for a release.
type Answer struct {
	Lease  *leases.Lease
	Write  *leases.WriteResult
	Record leases.Record
	Found  bool
}

// SendAcquire sends an acquire of resource for the worker itself (its name
// is the holder) at tick for ttl ticks.
func (w *Worker) SendAcquire(resource string, tick, ttl int64) (*Call, error) {
	return w.send(request{Op: opAcquire, Resource: resource, Holder: w.name, Tick: tick, TTL: ttl})
}

// SendRenew sends a renewal of held at tick for ttl ticks.
func (w *Worker) SendRenew(held leases.Lease, tick, ttl int64) (*Call, error) {
	return w.send(request{Op: opRenew, Lease: &held, Tick: tick, TTL: ttl})
}

// SendRelease sends a release of held at tick.
func (w *Worker) SendRelease(held leases.Lease, tick int64) (*Call, error) {
	return w.send(request{Op: opRelease, Lease: &held, Tick: tick})
}

// SendWrite sends a write of value with epoch to a receiver in mode.
func (w *Worker) SendWrite(mode leases.Mode, resource string, epoch int64, value string) (*Call, error) {
	return w.send(request{Op: opWrite, Resource: resource, Epoch: epoch, Value: value, Receiver: backend.Receiver(mode)})
}

// SendObserve sends an observe of epoch to the fenced receiver.
func (w *Worker) SendObserve(resource string, epoch int64) (*Call, error) {
	return w.send(request{Op: opFence, Resource: resource, Epoch: epoch})
}

// SendRead sends a read of the fenced receiver's record of resource.
func (w *Worker) SendRead(resource string) (*Call, error) {
	return w.send(request{Op: opRead, Resource: resource, Receiver: backend.Fenced})
}

// send writes one request line and returns without waiting. A stopped
// worker's pipe holds the line until the worker runs again.
func (w *Worker) send(req request) (*Call, error) {
	if w.left.Load() {
		return nil, w.errLeft()
	}
	line, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	if _, err := w.stdin.Write(append(line, '\n')); err != nil {
		return nil, fmt.Errorf("send %s to worker %s: %w%s", req.Op, w.name, err, w.stderr.saying())
	}
	return &Call{w: w, op: req.Op}, nil
}

// Wait reads the call's reply, bounded by ctx. Replies come in the order
// the requests were sent, so a worker's calls must be waited for in that
// order. An acquire that was refused is an error that matches
// leases.ErrLeaseHeld; any other refusal or failure is an error with the
// worker's message.
func (c *Call) Wait(ctx context.Context) (Answer, error) {
	got, err := c.w.receive(ctx)
	if err != nil {
		return Answer{}, err
	}
	if got.Refused != "" {
		return Answer{}, refused(got.Refused)
	}
	answer := Answer{Lease: got.Lease, Write: got.Write}
	if got.Read != nil {
		answer.Record, answer.Found = got.Read.Record, got.Read.Found
	}
	if !c.answered(answer, got.Read != nil) {
		return Answer{}, fmt.Errorf("worker %s sent no result for its %s", c.w.name, c.op)
	}
	return answer, nil
}

// answered reports whether the reply carries what the call asks for.
func (c *Call) answered(a Answer, read bool) bool {
	switch c.op {
	case opAcquire, opRenew:
		return a.Lease != nil
	case opWrite, opFence:
		return a.Write != nil
	case opRead:
		return read
	}
	return true
}
