package leases_test

// What the workers of TestPauseAndKill ask for: they behave as lease
// holders do, including one that was paused past its lease's expiry and
// does not know it yet.

import (
	"fmt"

	"leases"
	"leases/internal/experiment/worker"
)

// pkActor is one worker as the controller knows it: its process and what
// it believes about its lease. It believes it holds its lease until a
// renewal or release tells it otherwise, and goes on writing with it in
// the meantime, as a holder does that was paused past its expiry.
type pkActor struct {
	name        string
	w           *worker.Worker
	incarnation int // restarts so far; part of its values, so that every value is unique
	serial      int
	held        *leases.Lease  // the lease it believes it holds
	value       string         // the value it wrote first with held
	observed    bool           // it has sent held's epoch to the receiver ahead of writing
	old         []leases.Lease // leases it lost, to write with later anyway
	call        *worker.Call
	op          *pkOp // the request in flight, nil when it waits for one
	stopped     bool
	holdsLock   bool // it held SQLite's write lock when it was stopped
	wake        int  // the step at which its long pause ends; 0 when not in one
	killed      bool
}

// pkChoice is what one worker's next request is made of, drawn for every
// worker every step.
type pkChoice struct {
	p        float64
	resource int
	ttl      int64
	pick     int
}

// next is what a lease holder, or a worker that wants to become one, asks
// for next.
func (a *pkActor) next(now int64, c pkChoice) *pkOp {
	a.serial++
	resource := pkResources[c.resource]
	if a.held == nil {
		switch {
		case c.p < 0.15 && len(a.old) > 0:
			// A holder that lost its lease writes with it anyway.
			lost := a.old[c.pick%len(a.old)]
			return &pkOp{kind: pkWrite, resource: lost.Resource, epoch: lost.Epoch, value: a.newValue(lost.Epoch)}
		case c.p < 0.25:
			return &pkOp{kind: pkRead, resource: resource}
		}
		return &pkOp{kind: pkAcquire, resource: resource, tick: now, ttl: c.ttl}
	}
	held := *a.held
	switch {
	case !a.observed && c.p < 0.3:
		a.observed = true // fence before acting
		return &pkOp{kind: pkObserve, resource: held.Resource, epoch: held.Epoch}
	case c.p < 0.6:
		value := a.value
		switch {
		case value == "":
			value = a.newValue(held.Epoch)
			a.value = value
		case c.pick%5 == 0:
			value = a.newValue(held.Epoch) // a second value at the same epoch: a conflict
		}
		return &pkOp{kind: pkWrite, resource: held.Resource, epoch: held.Epoch, value: value}
	case c.p < 0.78:
		return &pkOp{kind: pkRenew, resource: held.Resource, held: held, epoch: held.Epoch, tick: now, ttl: c.ttl}
	case c.p < 0.88:
		return &pkOp{kind: pkRelease, resource: held.Resource, held: held, epoch: held.Epoch, tick: now}
	case c.p < 0.93:
		return &pkOp{kind: pkRead, resource: held.Resource}
	}
	// It walks away without releasing: the lease runs out on its own.
	a.lose()
	return &pkOp{kind: pkAcquire, resource: resource, tick: now, ttl: c.ttl}
}

func (a *pkActor) newValue(epoch int64) string {
	return fmt.Sprintf("%s.%d-e%d-%d", a.name, a.incarnation, epoch, a.serial)
}

// learn updates what the worker believes from a reply.
func (a *pkActor) learn(op *pkOp) {
	switch {
	case op.kind == pkAcquire && op.lease != nil:
		a.held, a.value, a.observed = op.lease, "", false
	case op.kind == pkRenew && op.lease != nil:
		a.held = op.lease
	case op.kind == pkRenew, op.kind == pkRelease:
		a.lose() // released, or refused as expired, superseded or late
	}
}

func (a *pkActor) lose() {
	if a.held == nil {
		return
	}
	a.old = append(a.old, *a.held)
	if len(a.old) > 3 {
		a.old = a.old[1:]
	}
	a.held = nil
}
