package stress

// The record both tests keep: every request sent to a worker and what
// became of it, numbered in the order the test saw sends, replies and
// kills, and the counts the tests log.

import (
	"fmt"
	"strings"
	"time"

	"leases"
)

// kind is what a worker is asked for.
type kind string

const (
	acquireOp kind = "acquire"
	renewOp   kind = "renew"
	releaseOp kind = "release"
	writeOp   kind = "write"
	observeOp kind = "observe"
	readOp    kind = "read"
)

// operation is one request and what became of it.
type operation struct {
	worker   string
	kind     kind
	resource string
	tick     int64        // acquire, renew, release
	ttl      int64        // acquire, renew
	epoch    int64        // write, observe; renew and release: held's
	value    string       // write
	held     leases.Lease // renew, release
	// sent and done number the moments the test sent the request and got
	// its reply or killed its worker, in one sequence with every other
	// operation's.
	sent, done int
	killed     bool   // its worker was killed while it was in flight
	refused    bool   // an acquire refused because the lease is held
	rejected   string // the error of a renewal, release or acquire refused as too late
	lease      *leases.Lease
	write      *leases.WriteResult
	record     leases.Record // read
	found      bool          // read
}

// The requests a holder makes, as operations.

func acquireOf(resource string, tick, ttl int64) *operation {
	return &operation{kind: acquireOp, resource: resource, tick: tick, ttl: ttl}
}

func renewalOf(held leases.Lease, tick, ttl int64) *operation {
	return &operation{kind: renewOp, resource: held.Resource, held: held, epoch: held.Epoch, tick: tick, ttl: ttl}
}

func releaseOf(held leases.Lease, tick int64) *operation {
	return &operation{kind: releaseOp, resource: held.Resource, held: held, epoch: held.Epoch, tick: tick}
}

func writeOf(resource string, epoch int64, value string) *operation {
	return &operation{kind: writeOp, resource: resource, epoch: epoch, value: value}
}

// committed reports whether the operation is known to have changed what
// it asked to change (or, for a write or observe, to have run).
func (o *operation) committed() bool { return !o.killed && !o.refused && o.rejected == "" }

func (o *operation) String() string {
	s := fmt.Sprintf("%s's %s of %s", o.worker, o.kind, o.resource)
	switch o.kind {
	case acquireOp:
		s += fmt.Sprintf(" at tick %d for %d", o.tick, o.ttl)
	case renewOp:
		s += fmt.Sprintf(" epoch %d at tick %d for %d", o.epoch, o.tick, o.ttl)
	case releaseOp:
		s += fmt.Sprintf(" epoch %d at tick %d", o.epoch, o.tick)
	case writeOp:
		s += fmt.Sprintf(" epoch %d %q", o.epoch, o.value)
	case observeOp:
		s += fmt.Sprintf(" epoch %d", o.epoch)
	}
	return s + fmt.Sprintf(" (events %d..%d)", o.sent, o.done)
}

// seen is the receiver's record an operation's reply showed.
func (o *operation) seen() leases.Record {
	if o.write != nil {
		return o.write.Record
	}
	return o.record
}

// isRejection reports whether err is the authority refusing a request
// that came too late: a renewal or release of a lease that expired or was
// superseded, or any request stamped with a tick older than the
// resource's last change (a paused worker's). Nothing changed.
func isRejection(k kind, err error) bool {
	msg := err.Error()
	if strings.Contains(msg, leases.ErrTickBackwards.Error()) {
		return k == acquireOp || k == renewOp || k == releaseOp
	}
	return (k == renewOp || k == releaseOp) &&
		(strings.Contains(msg, leases.ErrLeaseExpired.Error()) || strings.Contains(msg, leases.ErrNotHolder.Error()))
}

// tally is what a run did, for the log and docs/reliability.md. The load
// leaves the faults' counts at zero.
type tally struct {
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

// count adds an answered operation to the tally.
func (s *tally) count(op *operation) {
	switch op.kind {
	case acquireOp:
		s.Acquires++
		switch {
		case op.refused:
			s.Refusals++
		case op.rejected == "":
			s.Grants++
		}
	case renewOp:
		s.Renewals += boolCount(op.rejected == "")
	case releaseOp:
		s.Releases += boolCount(op.rejected == "")
	case writeOp:
		s.countWrite(op.write.Outcome)
	case observeOp:
		s.Observes++
	case readOp:
		s.Reads++
	}
	s.Rejections += boolCount(op.rejected != "")
	s.Late += boolCount(strings.Contains(op.rejected, leases.ErrTickBackwards.Error()))
}

func (s *tally) countWrite(outcome leases.Outcome) {
	switch outcome {
	case leases.Accepted:
		s.Accepted++
	case leases.Stale:
		s.Stale++
	case leases.Replay:
		s.Replays++
	case leases.Conflict:
		s.Conflicts++
	}
}

func boolCount(b bool) int {
	if b {
		return 1
	}
	return 0
}
