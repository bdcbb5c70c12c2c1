package leases_test

import (
	"os"
	"testing"

	"leases/internal/experiment"
)

// TestMain lets the test binary play the worker role: the experiment
// re-executes this binary, and a worker must never reach the test runner.
func TestMain(m *testing.M) {
	experiment.RunWorkerIfRequested()
	os.Exit(m.Run())
}
