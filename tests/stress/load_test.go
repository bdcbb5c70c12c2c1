package stress

// Reliability under load: the fleet without faults. Many worker processes
// contend for one resource on one database file, round after round; the
// checker is package history's.

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"leases"
	"leases/tests/history"
)

// soakEnv raises the load for a soak: LEASES_SOAK=workers,rounds. The run
// is bounded by the test's deadline only, so a soak needs a -timeout to
// match its size, for example
//
//	LEASES_SOAK=32,300 go test -timeout 30m -run TestLoad -v ./tests/stress
const soakEnv = "LEASES_SOAK"

// The load's lease lives two ticks; a round is three ticks.
const (
	loadWorkers     = 8
	loadRounds      = 40
	loadTTL         = 2
	loadRoundTicks  = 3
	loadResource    = "contended-record"
	loadExpiryRound = 4 // every fourth round the holder lets its lease expire
)

// TestLoadKeepsEveryInvariant starts N workers on one file and drives them
// through rounds. Round r starts at tick T = 3r:
//
//  1. at tick T every worker is sent an acquire, all at once: N processes
//     contend for the BEGIN IMMEDIATE lock, one is granted, the rest refused;
//  2. at tick T+1, all at once, the holder writes its value, resends it (a
//     replay) and renews to T+3; every earlier holder resends a different
//     value with its old epoch (stale, or a conflict if it lands before the
//     new holder's write); every worker that never held tries to acquire
//     (refused);
//  3. at tick T+2 the holder releases, except every fourth round, when its
//     lease runs out at T+3: the next round's acquires land exactly on the
//     expiry tick.
//
// No call may fail (so no SQLITE_BUSY reaches a caller), and the checker
// goes over every reply and the file afterwards, and porcupine over the
// history.
func TestLoadKeepsEveryInvariant(t *testing.T) {
	workers, rounds := loadSize(t)
	l := &loadRun{fleet: startFleet(t, workers)}
	for _, p := range l.procs {
		l.contenders = append(l.contenders, &contender{process: p})
	}
	for round := range rounds {
		l.round(round)
	}
	l.finish()
	l.check(fmt.Sprintf("%d workers, %d rounds", workers, rounds), []string{loadResource})
	l.tally.countAnswers(l.h)
	s := l.tally
	t.Logf("%d workers, %d rounds: %d acquire attempts, %d grants, %d refusals, %d renewals, %d releases; "+
		"writes %d accepted, %d stale, %d replays, %d conflicts; highest epoch %d; integrity_check %s; "+
		"%d operations in %v: %.0f operations/s, %.0f grants/s",
		workers, rounds, s.Acquires, s.Grants, s.Refusals, s.Renewals, s.Releases,
		s.Accepted, s.Stale, s.Replays, s.Conflicts, l.h.Epochs[loadResource], l.h.Integrity,
		s.Operations, s.Wall.Round(time.Millisecond), float64(s.Operations)/s.Wall.Seconds(), float64(s.Grants)/s.Wall.Seconds())
	if s.Grants < rounds || s.Refusals == 0 || s.Stale+s.Conflicts == 0 || s.Replays == 0 {
		t.Errorf("the load did not contend as designed: %+v", s)
	}
}

// loadSize is the default size, or LEASES_SOAK's.
func loadSize(t *testing.T) (workers, rounds int) {
	t.Helper()
	soak := os.Getenv(soakEnv)
	if soak == "" {
		return loadWorkers, loadRounds
	}
	first, second, found := strings.Cut(soak, ",")
	workers, errW := strconv.Atoi(first)
	rounds, errR := strconv.Atoi(second)
	if !found || errW != nil || errR != nil || workers <= 0 || rounds <= 0 {
		t.Fatalf("%s=%q: want workers,rounds", soakEnv, soak)
	}
	return workers, rounds
}

// loadRun is the fleet without faults, in rounds.
type loadRun struct {
	*fleet
	contenders []*contender // one for each of the fleet's processes, in order
}

// contender is one worker of the load and what it was last told.
type contender struct {
	*process
	lease     leases.Lease // latest lease granted to it
	everHeld  bool
	lastValue string // its last accepted value
}

// round runs one round's three phases, starting at tick 3r.
func (l *loadRun) round(round int) {
	t := int64(round * loadRoundTicks)
	l.now = t
	holder := l.contend(t)
	l.now = t + 1
	l.work(holder, t+1, fmt.Sprintf("round-%d-by-%s", round, holder.name))
	l.now = t + 2
	if round%loadExpiryRound == loadExpiryRound-1 {
		return // the lease runs out at t+3, the next round's tick
	}
	l.send(holder.process, releaseOf(holder.lease, t+2))
	l.answer(holder)
}

// contend sends every worker an acquire at tick t, all at once, and
// returns the one that was granted.
func (l *loadRun) contend(t int64) *contender {
	for _, c := range l.contenders {
		l.send(c.process, acquireOf(loadResource, t, loadTTL))
	}
	var holder *contender
	for _, c := range l.contenders {
		if op := l.answer(c); op.Result() == history.ResultOK {
			if holder != nil {
				l.t.Fatalf("two grants at tick %d: to %s (epoch %d) and %v", t, holder.name, holder.lease.Epoch, op)
			}
			holder = c
		}
	}
	if holder == nil {
		l.t.Fatalf("no worker was granted the lease at tick %d", t)
	}
	return holder
}

// work has, at tick t and all at once, the holder write its value, resend
// it and renew; every earlier holder resend a different value with its
// old epoch; and every other worker try to acquire.
func (l *loadRun) work(holder *contender, t int64, value string) {
	for _, c := range l.contenders {
		switch {
		case c == holder:
			l.send(c.process, writeOf(loadResource, c.lease.Epoch, value))
		case c.everHeld:
			l.send(c.process, writeOf(loadResource, c.lease.Epoch, c.lastValue+"-again"))
		default:
			l.send(c.process, acquireOf(loadResource, t, loadTTL))
		}
	}
	// The holder's next requests go while the others' are still running.
	l.answer(holder)
	l.send(holder.process, writeOf(loadResource, holder.lease.Epoch, value)) // the retried write
	l.answer(holder)
	l.send(holder.process, renewalOf(holder.lease, t, loadTTL))
	l.answer(holder)
	for _, c := range l.contenders {
		if c != holder {
			l.answer(c)
		}
	}
}

// answer receives c's reply, which must not be a refusal but of a held
// lease: in the load every renewal and release is of a live lease, and
// every tick is new.
func (l *loadRun) answer(c *contender) *history.Op {
	l.t.Helper()
	op := l.receive(c.process)
	switch r := op.Result(); {
	case r != history.ResultOK && r != history.ResultHeld:
		l.t.Fatalf("%v: %s", op, op.Ret.Err)
	case op.Ret.Lease != nil:
		c.lease, c.everHeld = *op.Ret.Lease, true
	case op.Call.Op == "write" && op.Ret.Outcome == leases.Accepted:
		c.lastValue = op.Call.Value
	}
	return op
}
