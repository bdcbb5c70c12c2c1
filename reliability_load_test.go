package leases_test

// Reliability under load: many worker processes contending for one
// database file. Not among the contract's 17 tests.

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"leases/internal/experiment/load"
)

// soakEnv raises the load for a soak: LEASES_SOAK=workers,rounds. The run
// is bounded by the test's deadline only, so a soak needs a -timeout to
// match its size, for example
//
//	LEASES_SOAK=32,300 go test -timeout 30m -run TestLoad -v .
const soakEnv = "LEASES_SOAK"

func TestLoadKeepsEveryInvariant(t *testing.T) {
	opts := load.Options{Workers: 8, Rounds: 40}
	if soak := os.Getenv(soakEnv); soak != "" {
		var ok bool
		if opts.Workers, opts.Rounds, ok = parsePair(soak); !ok {
			t.Fatalf("%s=%q: want workers,rounds", soakEnv, soak)
		}
	}
	report, err := load.Run(testContext(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d workers, %d rounds: %d acquire attempts, %d grants, %d refusals, %d renewals, %d releases; "+
		"writes %d accepted, %d stale, %d replays, %d conflicts; highest epoch %d; integrity_check %s; "+
		"%d operations in %v: %.0f operations/s, %.0f grants/s",
		report.Workers, report.Rounds, report.Attempts, report.Grants, report.Refusals, report.Renewals, report.Releases,
		report.Accepted, report.Stale, report.Replays, report.Conflicts, report.HighestEpoch, report.IntegrityCheck,
		report.Operations, report.Wall.Round(time.Millisecond), report.OperationsPerSecond, report.GrantsPerSecond)
	if report.Grants < opts.Rounds || report.Refusals == 0 || report.Stale+report.Conflicts == 0 || report.Replays == 0 {
		t.Errorf("the load did not contend as designed: %+v", report)
	}
}

func parsePair(s string) (int, int, bool) {
	first, second, found := strings.Cut(s, ",")
	a, errA := strconv.Atoi(first)
	b, errB := strconv.Atoi(second)
	return a, b, found && errA == nil && errB == nil && a > 0 && b > 0
}
