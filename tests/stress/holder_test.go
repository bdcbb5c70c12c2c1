package stress

// What the workers of TestPauseAndKill ask for: they behave as lease
// holders do, including one that was paused past its lease's expiry and
// does not know it yet.

import (
	"fmt"

	"leases"
	"leases/tests/history"
)

// holder is one worker of TestPauseAndKill: its process and what it
// believes about its lease. It believes it holds its lease until a
// renewal or release tells it otherwise, and goes on writing with it in
// the meantime, as a holder does that was paused past its expiry. A
// restarted process is a new holder that knows nothing of the old one's
// lease.
type holder struct {
	*process
	serial   int
	held     *leases.Lease  // the lease it believes it holds
	value    string         // the value it wrote first with held
	observed bool           // it has sent held's epoch to the receiver ahead of writing
	old      []leases.Lease // leases it lost, to write with later anyway
	wake     int            // the step at which its long pause ends; 0 when not in one
}

// choice is what one holder's next request is made of, drawn for every
// holder every step.
type choice struct {
	p        float64
	resource int
	ttl      int64
	pick     int
}

// next is what a lease holder, or a worker that wants to become one, asks
// for next.
func (h *holder) next(now int64, c choice) history.Record {
	h.serial++
	resource := pauseKillResources[c.resource]
	if h.held == nil {
		switch {
		case c.p < 0.15 && len(h.old) > 0:
			// A holder that lost its lease writes with it anyway.
			lost := h.old[c.pick%len(h.old)]
			return writeOf(lost.Resource, lost.Epoch, h.newValue(lost.Epoch))
		case c.p < 0.25:
			return readOf(resource)
		}
		return acquireOf(resource, now, c.ttl)
	}
	held := *h.held
	switch {
	case !h.observed && c.p < 0.3:
		h.observed = true // fence before acting
		return fenceOf(held.Resource, held.Epoch)
	case c.p < 0.6:
		return writeOf(held.Resource, held.Epoch, h.valueFor(held.Epoch, c.pick))
	case c.p < 0.78:
		return renewalOf(held, now, c.ttl)
	case c.p < 0.88:
		return releaseOf(held, now)
	case c.p < 0.93:
		return readOf(held.Resource)
	}
	// It walks away without releasing: the lease runs out on its own.
	h.lose()
	return acquireOf(resource, now, c.ttl)
}

// valueFor is the value the holder writes with its lease's epoch: the
// first it wrote, resent, or now and then a second one (a conflict).
func (h *holder) valueFor(epoch int64, pick int) string {
	switch {
	case h.value == "":
		h.value = h.newValue(epoch)
		return h.value
	case pick%5 == 0:
		return h.newValue(epoch)
	}
	return h.value
}

// newValue is a value no other write of the run has: the incarnation and
// serial make it unique.
func (h *holder) newValue(epoch int64) string {
	return fmt.Sprintf("%s.%d-e%d-%d", h.name, h.incarnation, epoch, h.serial)
}

// learn updates what the holder believes from a reply.
func (h *holder) learn(op *history.Op) {
	lease := op.Ret.Lease
	switch kind := op.Call.Op; {
	case kind == "acquire" && op.Result() == history.ResultOK:
		h.held, h.value, h.observed = lease, "", false
	case kind == "renew" && op.Result() == history.ResultOK:
		h.held = lease
	case kind == "renew", kind == "release":
		h.lose() // released, or refused as expired, superseded or late
	}
}

func (h *holder) lose() {
	if h.held == nil {
		return
	}
	h.old = append(h.old, *h.held)
	if len(h.old) > 3 {
		h.old = h.old[1:]
	}
	h.held = nil
}
