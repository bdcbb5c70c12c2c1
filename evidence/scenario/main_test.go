package scenario_test

import (
	"os"
	"testing"

	"leases/evidence/backend"
	"leases/evidence/worker"
	"leases/internal/roles"
)

// TestMain lets this binary play the scenarios' workers (package roles).
// Where a worker cannot be paused, the scenarios skip before starting one.
func TestMain(m *testing.M) {
	workerRole := worker.Register(backend.SQLite{})
	roles.Run()
	if worker.CanStop() != nil {
		workerRole.MaySkip()
	}
	os.Exit(roles.CheckUnused(m.Run()))
}
