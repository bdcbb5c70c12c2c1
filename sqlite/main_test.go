package sqlite_test

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"testing"

	"leases/evidence/backend"
	"leases/evidence/worker"
	"leases/internal/roles"
	"leases/internal/sqlitestore"
)

// How a test configures the workers it starts (worker.Options.Env): the
// fault tests need a worker that stops inside a transaction, and one
// whose requests stay on one thread.
const (
	// pauseEnv names the point (see sqlitestore.HookInsideTransaction)
	// at which a worker announces {"paused": point} and then holds its
	// transaction open until it is killed; if its input closes first it
	// exits without committing.
	pauseEnv = "LEASES_TEST_PAUSE_AT"
	// oneThreadEnv keeps a worker's requests, and so its SQLite calls, on
	// one OS thread: strace counts a system call's invocations per
	// thread, and a fault meant for the second read of a request must not
	// land elsewhere because the goroutine moved.
	oneThreadEnv = "LEASES_TEST_ONE_THREAD"
)

// TestMain lets this binary play the worker role (package roles): the
// tests of what a process sees of the file (killed inside a transaction,
// failed commits and reads, files changed under it) re-execute this
// binary as their workers.
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
	worker.Register(backend.SQLite{})
	roles.Run()
	os.Exit(roles.CheckUnused(m.Run()))
}
