// Package experimenttest is what the tests that run the experiment's
// processes share: workers on a SQLite file, the scripted scenarios with
// their workers' pids, the processes' ends, and the command run-experiment
// built once per test binary (command.go). A test binary that starts
// workers registers the worker role in its TestMain (worker.Register, then
// roles.Run); the root package's contract suite and the tests of package
// sqlite, of the workers, of the scenarios and of the command use it.
//
// Part of the evidence's own tests (the evidence is what cmd/run-experiment
// reruns), not of the library: no API promise.
package experimenttest

import (
	"context"
	"errors"
	"os"
	"testing"

	"leases/evidence/backend"
	"leases/evidence/scenario"
	"leases/evidence/worker"
	"leases/testkit/testctx"
)

// SkipWithoutStop skips t where a worker cannot be paused (see
// worker.CanStop: Windows has no SIGSTOP), saying so in one line.
func SkipWithoutStop(t testing.TB) {
	t.Helper()
	if err := worker.CanStop(); err != nil {
		t.Skip("skipped: " + err.Error())
	}
}

// SignalProcess sends sig to the process pid, which need not be a child.
func SignalProcess(pid int, sig os.Signal) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return errors.Join(p.Signal(sig), p.Release())
}

// StartWorker starts a worker process on the SQLite file at path, ending
// it when the test ends; env adds KEY=value entries to its environment.
func StartWorker(t testing.TB, ctx context.Context, name, path string, env ...string) *worker.Worker {
	t.Helper()
	w, err := worker.Start(ctx, name, worker.Options{Backend: "sqlite", Address: path, Env: env})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Kill)
	return w
}

// RunScenario runs one named scenario on SQLite and reports its workers'
// pids (the tool server's too), failing t unless they were at least two
// processes, each of its own and other than the test's.
func RunScenario(t *testing.T, name string) (scenario.Scenario, map[string]int) {
	t.Helper()
	SkipWithoutStop(t)
	pids := map[string]int{}
	sc, err := scenario.RunByName(testctx.Context(t), backend.SQLite{}, name, scenario.Options{
		WorkerStarted: func(_, worker string, pid int) { pids[worker] = pid },
	})
	if err != nil {
		t.Fatal(err)
	}
	if !separate(pids) {
		t.Fatalf("the scenario's workers (A and B, or one of them and the tool server) must be processes of their own, other than the test's (%d): %v", os.Getpid(), pids)
	}
	return sc, pids
}

// separate reports whether pids are at least two processes, each other
// than every other and than this one.
func separate(pids map[string]int) bool {
	seen := map[int]bool{os.Getpid(): true}
	for _, pid := range pids {
		if pid == 0 || seen[pid] {
			return false
		}
		seen[pid] = true
	}
	return len(pids) >= 2
}

// FindStep returns the n-th (from 1) step of actor doing operation.
func FindStep(t testing.TB, sc scenario.Scenario, actor, operation string, n int) scenario.Step {
	t.Helper()
	for _, s := range sc.Steps {
		if s.Actor == actor && s.Operation == operation {
			n--
			if n == 0 {
				return s
			}
		}
	}
	t.Fatalf("scenario %s has no such step: %s %s", sc.Name, actor, operation)
	return scenario.Step{}
}
