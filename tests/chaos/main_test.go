package chaos_test

import (
	"fmt"
	"os"
	"testing"

	"leases/tests/chaos"
)

// roleEnv names the role the test binary plays when it is re-executed:
// one of roles. Unset, it runs the tests.
const roleEnv = "LEASES_CHAOS_ROLE"

// roles are what this binary can be re-executed as.
var roles = map[string]func() int{
	"worker": chaos.RunWorker,
}

func TestMain(m *testing.M) {
	if name := os.Getenv(roleEnv); name != "" {
		role, ok := roles[name]
		if !ok {
			fmt.Fprintf(os.Stderr, "chaos: %s=%q names no role\n", roleEnv, name)
			os.Exit(2)
		}
		os.Exit(role())
	}
	os.Exit(m.Run())
}
