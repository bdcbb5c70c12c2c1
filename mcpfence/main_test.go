package mcpfence_test

import (
	"os"
	"testing"

	"leases/internal/roles"
)

// TestMain plays the example's tool server or agent when this binary was
// started in their role (processes_test.go), and otherwise runs the
// tests.
func TestMain(m *testing.M) {
	roles.Run()
	os.Exit(roles.CheckUnused(m.Run()))
}
