package stress

// Pauses and crashes at random moments: the fleet with faults. Eight
// workers contend for three resources on one SQLite file while the test,
// their only clock, stops them with SIGSTOP and kills them with SIGKILL
// (faults_test.go); the checker is package history's.

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"leases/evidence/experimenttest"
	"leases/tests/history"
)

// The run's size and seed come from the environment: LEASES_PAUSE_KILL is
// a number of operations or a duration (LEASES_PAUSE_KILL=90s for a soak),
// LEASES_PAUSE_KILL_SEED replays a run's schedule of faults and choices.
const (
	pauseKillEnv      = "LEASES_PAUSE_KILL"
	pauseKillSeedEnv  = "LEASES_PAUSE_KILL_SEED"
	pauseKillShortRun = 400 // operations in the run that is part of go test ./...
	pauseKillWorkers  = 8
)

var pauseKillResources = []string{"r0", "r1", "r2"}

func TestPauseAndKill(t *testing.T) {
	experimenttest.SkipWithoutStop(t)
	skipWithoutProcfs(t)
	budget := pauseKillBudget(t)
	seed := pauseKillSeed(t)
	t.Logf("seed %d; replay with %s=%d", seed, pauseKillSeedEnv, seed)

	r := &pauseKillRun{
		fleet:    startFleet(t, pauseKillWorkers),
		schedule: rand.New(rand.NewPCG(seed, 1)),
		choices:  rand.New(rand.NewPCG(seed, 2)),
	}
	for _, p := range r.procs {
		r.holders = append(r.holders, &holder{process: p})
	}
	for !budget.spent(r.tally.Operations, time.Since(r.start)) {
		r.step()
	}
	r.finish()
	r.check("seed "+strconv.FormatUint(seed, 10), pauseKillResources)
	r.tally.countAnswers(r.h)
	logPauseKill(t, seed, r.now, r.tally, r.h)
	if s := r.tally; s.Grants == 0 || s.Stale == 0 || s.Stops == 0 || s.Kills == 0 || s.Restarts != s.Kills {
		t.Errorf("the run did not exercise what it is for: %+v", s)
	}
}

// logPauseKill logs what the run did, in the terms of
// docs/reliability.md's table.
func logPauseKill(t *testing.T, seed uint64, now int64, s tally, h *history.History) {
	t.Helper()
	// Every epoch the authority's rows count up to and no reply carried
	// went to a killed acquire.
	lost := -s.Grants
	for _, epoch := range h.Epochs {
		lost += int(epoch)
	}
	t.Logf("seed %d, %d steps to tick %d, %v: %d operations (%d acquires: %d grants, %d refused, %d epochs taken by killed acquires; "+
		"%d renewals, %d releases, %d refused as expired or superseded, %d refused as late (tick backwards); "+
		"writes %d accepted, %d stale, %d replays, %d conflicts; %d fences; %d reads); "+
		"%d stops between sends (%d caught the worker holding the write lock), %d long pauses; "+
		"%d kills (%d of a stopped worker, %d of them holding the write lock), %d restarts, %d operations left with an unknown outcome; "+
		"replay with %s=%d %s=%d",
		seed, s.Steps, now, s.Wall.Round(time.Millisecond), s.Operations, s.Acquires, s.Grants, s.Refusals, lost, s.Renewals, s.Releases, s.Rejections-s.Late, s.Late,
		s.Accepted, s.Stale, s.Replays, s.Conflicts, s.Fences, s.Reads,
		s.Stops, s.StopsHoldingLock, s.Pauses, s.Kills, s.KillsStopped, s.KillsHoldingLock, s.Restarts, s.Unknown,
		pauseKillSeedEnv, seed, pauseKillEnv, s.Operations)
}

// pauseKillSeed is LEASES_PAUSE_KILL_SEED, or a new random seed.
func pauseKillSeed(t *testing.T) uint64 {
	t.Helper()
	s := os.Getenv(pauseKillSeedEnv)
	if s == "" {
		return rand.Uint64()
	}
	seed, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: want an unsigned integer", pauseKillSeedEnv, s)
	}
	return seed
}

// budget is how long a run goes on: a number of operations, or, for a
// soak, a wall-clock duration.
type budget struct {
	ops  int
	wall time.Duration
}

func pauseKillBudget(t *testing.T) budget {
	t.Helper()
	v := os.Getenv(pauseKillEnv)
	if v == "" {
		return budget{ops: pauseKillShortRun}
	}
	if n, err := strconv.Atoi(v); err == nil && n > 0 {
		return budget{ops: n}
	}
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return budget{wall: d}
	}
	t.Fatalf("%s=%q: want a number of operations or a duration such as 90s", pauseKillEnv, v)
	return budget{}
}

func (b budget) spent(ops int, elapsed time.Duration) bool {
	if b.wall > 0 {
		return elapsed >= b.wall
	}
	return ops >= b.ops
}
