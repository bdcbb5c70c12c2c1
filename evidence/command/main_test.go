package command_test

import (
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"

	"leases/evidence/backend"
	"leases/evidence/command"
	"leases/evidence/experimenttest"
	"leases/evidence/worker"
	"leases/internal/roles"
	"leases/internal/sqlitestore"
)

// drivers are the backends this test binary knows: the command it plays,
// and so its workers, run on SQLite. The command's edges on etcd are
// tests/etcdcommand's.
var drivers = []backend.Driver{backend.SQLite{}}

// interruptEnv makes a run of the command interrupt itself, as
// POINT:SIGNAL. POINT "scenario": every worker sends SIGNAL to the
// command inside each acquire's transaction; "exploration": the command
// sends it to itself inside its first acquire, which is the
// exploration's (the command's own database calls during the scenarios
// only read).
const interruptEnv = "LEASES_TEST_INTERRUPT_AT"

// commandRole is the command run-experiment itself, exactly as
// cmd/run-experiment runs it (command.Command), on SQLite alone; its
// workers are this binary too.
var commandRole = roles.Register("command-test-command", func([]string) int {
	sqlitestore.HookInsideTransaction = nil // the workers' hook, not the command's
	if point, sig := interruptPoint(); point == "exploration" {
		var once sync.Once
		sqlitestore.HookInsideTransaction = func(string) {
			once.Do(func() { _ = experimenttest.SignalProcess(os.Getpid(), sig) })
		}
	}
	return command.Command(drivers...)
})

// TestMain lets this binary play the command and its workers (package
// roles). The command's process starts the workers, not this one; where
// a worker cannot be paused, every test that plays the command skips.
func TestMain(m *testing.M) {
	if point, sig := interruptPoint(); point == "scenario" {
		sqlitestore.HookInsideTransaction = func(op string) {
			if op == "acquire" {
				_ = experimenttest.SignalProcess(os.Getppid(), sig)
			}
		}
	}
	workerRole := worker.Register(drivers...)
	roles.Run()
	workerRole.MaySkip()
	if worker.CanStop() != nil {
		commandRole.MaySkip()
	}
	code := m.Run()
	experimenttest.RemoveBuiltCommand()
	os.Exit(roles.CheckUnused(code))
}

// interruptPoint reads interruptEnv.
func interruptPoint() (point string, sig syscall.Signal) {
	point, name, _ := strings.Cut(os.Getenv(interruptEnv), ":")
	sig = syscall.SIGINT
	if name == "SIGTERM" {
		sig = syscall.SIGTERM
	}
	return point, sig
}
