package leases_test

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"testing"

	"leases/internal/experiment/experimenttest"
	"leases/internal/experiment/worker"
	"leases/internal/roles"
	"leases/internal/sqlitestore"
)

// Test-only roles of this binary, chosen by environment variables. The
// experiment re-executes this binary as its workers; the fault tests also
// need a worker that stops inside a transaction, and a controller of its
// own that the test can kill.
const (
	// pauseEnv names the point (see leases' test hook) at which a worker
	// announces {"paused": point} and then holds its transaction open
	// until it is killed; if its input closes first it exits without
	// committing.
	pauseEnv = "LEASES_TEST_PAUSE_AT"
	// oneThreadEnv keeps a worker's requests, and so its SQLite calls, on
	// one OS thread: strace counts a system call's invocations per
	// thread, and a fault meant for the second read of a request must not
	// land elsewhere because the goroutine moved.
	oneThreadEnv = "LEASES_TEST_ONE_THREAD"
)

// TestMain lets the test binary play the worker role: the experiment
// re-executes this binary, and a worker must never reach the test runner.
func TestMain(m *testing.M) {
	if point := os.Getenv(pauseEnv); point != "" {
		sqlitestore.HookInsideTransaction = func(got string) {
			if got == point {
				fmt.Printf("{\"paused\":%q}\n", point)
				_, _ = io.Copy(io.Discard, os.Stdin)
				os.Exit(3) // never reach COMMIT
			}
		}
	}
	if os.Getenv(oneThreadEnv) != "" {
		runtime.LockOSThread()
	}
	// The worker role first (package roles): workers inherit the
	// controller's environment, and must not become controllers in turn.
	worker.Register(drivers...)
	roles.Run()
	code := m.Run()
	experimenttest.RemoveBuiltCommand()
	os.Exit(code)
}
