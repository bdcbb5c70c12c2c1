package toolchaos_test

import (
	"os"
	"testing"

	"leases/internal/roles"
	"leases/tests/toolchaos"
)

// The test binary re-executed as a tool server (args: kind, directory)
// and as an agent (args: its configuration, as JSON).
var (
	serverRole = roles.Register("toolchaos-server", func(args []string) int { return toolchaos.RunServer(args[0], args[1]) })
	agentRole  = roles.Register("toolchaos-agent", func(args []string) int { return toolchaos.RunAgent(args[0]) })
)

func TestMain(m *testing.M) {
	roles.Run()
	os.Exit(roles.CheckUnused(m.Run()))
}
