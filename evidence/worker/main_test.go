package worker_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"testing"

	"leases/evidence/backend"
	"leases/evidence/worker"
	"leases/internal/roles"
)

// groupOnlyEnv makes the controller start its workers with
// worker.Options.GroupOnly: without Linux's parent-death signal.
const groupOnlyEnv = "LEASES_TEST_GROUP_ONLY"

// controllerRole is a controller of the test's own, which the test can
// kill under its workers: it starts two workers on the database named by
// its one argument (see playController).
var controllerRole = roles.Register("worker-test-controller", func(args []string) int {
	return playController(args[0])
})

// TestMain lets this binary play the worker and the controller (package
// roles). The controller starts the workers, not this process; where a
// worker cannot be paused, the test that starts the controller skips.
func TestMain(m *testing.M) {
	workerRole := worker.Register(backend.SQLite{})
	roles.Run()
	workerRole.MaySkip()
	if worker.CanStop() != nil {
		controllerRole.MaySkip()
	}
	os.Exit(roles.CheckUnused(m.Run()))
}

// playController starts two workers that wait for commands, pauses the
// first (worker.Stop, which returns once the kernel reports it stopped),
// prints their pids, and waits for its own input to end. Killed, it leaves
// the workers without a controller.
func playController(dbPath string) int {
	ctx := context.Background()
	var pids []any
	var workers []*worker.Worker
	for _, name := range []string{"A", "B"} {
		w, err := worker.Start(ctx, name, worker.Options{Backend: "sqlite", Address: dbPath, GroupOnly: os.Getenv(groupOnlyEnv) != ""})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		pids, workers = append(pids, w.PID()), append(workers, w)
	}
	if err := workers[0].Stop(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(pids...)
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	return 0
}
