package stress

import (
	"os"
	"testing"

	"leases/evidence/backend"
	"leases/evidence/worker"
	"leases/internal/roles"
)

// TestMain lets this binary play the worker role (package roles): the
// load and pause-and-kill tests re-execute it as their workers, and a
// worker must never reach the test runner.
func TestMain(m *testing.M) {
	worker.Register(backend.SQLite{})
	roles.Run()
	os.Exit(roles.CheckUnused(m.Run()))
}
