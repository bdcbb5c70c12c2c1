package stress

// The faults of TestPauseAndKill: each step, drawn from a seeded schedule,
// the fleet's workers are sent their holders' next requests while one may
// be stopped between two sends, one killed, and one paused for longer.

import (
	"math/rand/v2"

	"leases/tests/history"
)

// How often each fault is drawn per step; a step sends one request to
// every worker that is not paused.
const (
	stopChance  = 0.6  // a worker stopped between two sends, resumed before any reply is awaited
	killChance  = 0.12 // a worker killed with its request in flight, and restarted
	pauseChance = 0.12 // an idle worker stopped for 1 to 5 steps while the others go on
)

// pauseKillRun is the fleet with faults, and the test as its clock.
type pauseKillRun struct {
	*fleet
	holders []*holder // one for each of the fleet's processes, in order
	// schedule draws the clock's steps (the fleet's now, which every
	// request carries) and the faults, choices what the holders ask for.
	// Each draws the same amount every step whatever the replies were, so
	// a seed replays the same faults at the same moments.
	schedule, choices *rand.Rand
}

// faults is one step's schedule, drawn in full every step.
type faults struct {
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

func (r *pauseKillRun) drawFaults() faults {
	g := r.schedule
	n := len(r.holders)
	f := faults{
		advance: []int64{0, 1, 1, 1, 1, 2}[g.IntN(6)],
		order:   g.Perm(n), replies: g.Perm(n),
		stop: g.IntN(n), stopAfter: g.IntN(n + 1), stopHolder: g.IntN(4) != 0,
		kill: g.IntN(n), killStopped: g.IntN(2) == 0,
		pause: g.IntN(n), pauseFor: 1 + g.IntN(5), queue: g.IntN(4) != 0,
		stopP: g.Float64(), killP: g.Float64(), pP: g.Float64(),
	}
	if f.stopP >= stopChance {
		f.stop = -1
	}
	if f.killP >= killChance {
		f.kill = -1
	}
	if f.pP >= pauseChance {
		f.pause = -1
	}
	return f
}

func (r *pauseKillRun) drawChoice() choice {
	g := r.choices
	return choice{p: g.Float64(), resource: g.IntN(len(pauseKillResources)), ttl: 1 + g.Int64N(4), pick: g.IntN(1 << 20)}
}

// step advances the clock and sends one request to every worker that is
// not paused, stopping one of them between two sends at random and
// resuming it before any reply is awaited: a stopped worker may hold the
// write lock, and the others' transactions queue behind it until it runs
// again. A worker paused for longer is stopped only while it waits for a
// request (it then holds no lock, which the test checks), so the others
// go on around it.
func (r *pauseKillRun) step() {
	r.tally.Steps++
	f := r.drawFaults()
	r.now += f.advance
	requests := make([]*history.Record, len(r.holders))
	for i, h := range r.holders {
		c := r.drawChoice()
		if !h.stopped && h.op == nil {
			req := h.next(r.now, c)
			requests[i] = &req
		}
	}
	queued := r.drawChoice()
	stopped := r.sendAll(f, requests)
	// Nobody's reply is awaited before the stopped worker runs again or
	// is dead.
	victim := r.victim(f, stopped)
	if victim != nil && victim.stopped {
		r.kill(victim.process)
	}
	if stopped != nil && !stopped.killed {
		r.resume(stopped.process)
	}
	r.wakePaused()
	r.collect(f.replies, victim)
	r.restartKilled()
	if f.pause >= 0 {
		if h := r.holders[f.pause]; !h.stopped && h.op == nil {
			r.pause(h, f.pauseFor, f.queue, queued)
		}
	}
}

// sendAll sends the requests in the schedule's order, stopping the
// schedule's worker after so many of them; it returns that worker, or nil.
func (r *pauseKillRun) sendAll(f faults, requests []*history.Record) (stopped *holder) {
	for k, i := range append(f.order, -1) {
		if k == f.stopAfter && f.stop >= 0 {
			stopped = r.stopBetweenSends(f)
		}
		if i >= 0 && requests[i] != nil {
			r.send(r.holders[i].process, *requests[i])
		}
	}
	return stopped
}

// stopBetweenSends stops the schedule's worker, or, as the schedule may
// ask, the one that holds the write lock now; nil if it is stopped already.
func (r *pauseKillRun) stopBetweenSends(f faults) *holder {
	h := r.holders[f.stop]
	if f.stopHolder {
		if p := r.lockHolder(); p != nil {
			h = r.holderOf(p)
		}
	}
	if h.stopped {
		return nil
	}
	r.stop(h.process)
	r.tally.Stops++
	r.tally.StopsHoldingLock += boolCount(h.holdsLock)
	return h
}

func (r *pauseKillRun) holderOf(p *process) *holder {
	for _, h := range r.holders {
		if h.process == p {
			return h
		}
	}
	panic("no holder for " + p.name)
}

// victim is the worker the step kills, or nil. The first stop that
// catches a worker holding the write lock kills it, to show that its
// death releases the lock: the others' requests, queued behind it, then
// go through.
func (r *pauseKillRun) victim(f faults, stopped *holder) *holder {
	switch {
	case stopped != nil && (f.kill >= 0 && f.killStopped || stopped.holdsLock && r.tally.KillsHoldingLock == 0):
		return stopped
	case f.kill >= 0:
		return r.holders[f.kill]
	}
	return nil
}

// wakePaused resumes every worker whose long pause ends at this step.
func (r *pauseKillRun) wakePaused() {
	for _, h := range r.holders {
		if h.wake == r.tally.Steps && !h.killed {
			r.resume(h.process)
			h.wake = 0
		}
	}
}

// collect waits for the replies in the schedule's order, killing the
// victim instead if it still runs: its reply may be on its way, or its
// transaction not yet begun.
func (r *pauseKillRun) collect(order []int, victim *holder) {
	for _, i := range order {
		h := r.holders[i]
		switch {
		case h == victim && !h.killed:
			r.kill(h.process)
		case h.op != nil && !h.stopped && !h.killed:
			h.learn(r.receive(h.process))
		}
	}
}

// restartKilled starts a new process, and a new holder, for each one
// killed.
func (r *pauseKillRun) restartKilled() {
	for _, h := range r.holders {
		if h.killed {
			r.restart(h.process)
			*h = holder{process: h.process}
		}
	}
}

// pause stops an idle worker for steps steps; with queue, its next
// request waits in its pipe meanwhile, stamped with the tick at which it
// was sent, as a paused process's request is.
func (r *pauseKillRun) pause(h *holder, steps int, queue bool, c choice) {
	r.stop(h.process)
	if h.holdsLock {
		r.t.Fatalf("%s waited for a request and still held the write lock when it was stopped", h.name)
	}
	r.tally.Pauses++
	h.wake = r.tally.Steps + steps
	if queue {
		r.send(h.process, h.next(r.now, c))
	}
}
