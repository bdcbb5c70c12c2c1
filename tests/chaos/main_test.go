package chaos_test

import (
	"os"
	"testing"

	"leases/internal/roles"
	"leases/tests/chaos"
)

// workerRole is the test binary re-executed as a chaos worker.
var workerRole = roles.Register("chaos-worker", func([]string) int { return chaos.RunWorker() })

func TestMain(m *testing.M) {
	roles.Run()
	os.Exit(roles.CheckUnused(m.Run()))
}
