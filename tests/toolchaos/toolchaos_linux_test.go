package toolchaos_test

import (
	"os"
	"strconv"
	"testing"
	"time"

	"leases/testkit/testctx"
	"leases/tests/history"
)

// soakEnv turns the short run into a longer one: LEASES_TOOLCHAOS_SOAK=DURATION
// (for example 2m) is how long the faults go on.
const soakEnv = "LEASES_TOOLCHAOS_SOAK"

// seedEnv replays a run's choices of faults: LEASES_TOOLCHAOS_SEED=N.
const seedEnv = "LEASES_TOOLCHAOS_SEED"

// TestToolPathUnderChaos runs agents on sessions calling the HTTP and
// MCP tool servers while the controller stops and kills agents, kills
// and restarts the servers, and cuts answers; then checks the history
// (history.VerifyTools).
func TestToolPathUnderChaos(t *testing.T) {
	cfg := config{Agents: 5, Resources: []string{"job-a", "job-b", "job-c"}, TTL: time.Second, OpsPerTenure: 8,
		Run: 4 * time.Second, Seed: uint64(time.Now().UnixNano()), Late: 0.1, Cut: 0.2}
	if s := os.Getenv(seedEnv); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", seedEnv, s, err)
		}
		cfg.Seed = seed
	}
	if s := os.Getenv(soakEnv); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("%s=%q: %v", soakEnv, s, err)
		}
		cfg.Run = d
	}
	// The run, the agents' end (a few time-to-lives) and the check must
	// fit before the test's deadline.
	if bound := testctx.Bound(t); cfg.Run > bound/3 {
		t.Fatalf("a run of %v does not fit in the test's %v: raise -timeout", cfg.Run, bound)
	}
	t.Logf("seed %d (%s replays the same choices of faults)", cfg.Seed, seedEnv)
	ctx := testctx.Context(t)
	c := newController(t, cfg)
	for range cfg.Agents {
		c.startAgent(ctx)
	}
	began := time.Now()
	c.faults(ctx)
	c.stop(ctx)
	h := c.history(ctx)
	verdict := history.VerifyTools(h, history.Options{Timeout: testctx.Bound(t) / 2})
	verdict.Report(t, "tool path")
	t.Logf("ran %v; %v", time.Since(began).Round(time.Millisecond), verdict)
	t.Logf("%v", h.ToolFigures())
	t.Logf("faults: %d calls stopped as they went out, %d agents stopped at random, %d agents killed, %d server restarts, answers cut: %d http, %d mcp",
		c.counts.Late, c.counts.Paused, c.counts.Killed, c.counts.Restarted,
		c.servers["http"].proxy.cuts.Load(), c.servers["mcp"].proxy.cuts.Load())
}
