package leases_test

import (
	"os"
	"testing"

	"leases/evidence/backend"
	"leases/evidence/experimenttest"
	"leases/evidence/worker"
	"leases/internal/roles"
)

// TestMain lets this binary play the worker role (package roles): the
// contract suite's scenarios and process tests re-execute this binary as
// their workers, and a worker must never reach the test runner. The command the contract suite
// runs is the one built from ./cmd/run-experiment, removed at the end.
func TestMain(m *testing.M) {
	worker.Register(backend.SQLite{})
	roles.Run()
	code := m.Run()
	experimenttest.RemoveBuiltCommand()
	os.Exit(roles.CheckUnused(code))
}
