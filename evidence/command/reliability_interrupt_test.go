package command_test

// The command interrupted by a signal: one line naming the signal, exit 3,
// no worker and no temporary directory left, nothing written. Not among
// the contract's 17 tests.

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"leases/evidence/command"
	"leases/evidence/experimenttest"
)

func TestInterruptedCommand(t *testing.T) {
	experimenttest.SkipWithoutStop(t)
	cases := []struct{ at, want string }{
		// A worker signals the command from inside its first
		// transaction, while the command waits for its reply.
		{"scenario:SIGINT", "run-experiment: interrupted by SIGINT\n"},
		// Before the fix, the line was whatever the interrupted step
		// returned: "snapshot: context canceled", "commit: sql:
		// transaction has already been committed or rolled back"...
		{"exploration:SIGINT", "run-experiment: interrupted by SIGINT\n"},
		{"exploration:SIGTERM", "run-experiment: interrupted by SIGTERM\n"},
	}
	for _, tc := range cases {
		t.Run(tc.at, func(t *testing.T) {
			t.Parallel()
			out := filepath.Join(t.TempDir(), "out.json")
			got := commandProcess{env: []string{interruptEnv + "=" + tc.at}}.run(t, "--output", out)
			if got.code != command.ExitFailed || got.stderr != tc.want {
				t.Fatalf("exit %d, stderr %q; want exit 3 and %q", got.code, got.stderr, tc.want)
			}
			if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("an interrupted run wrote %s", out)
			}
		})
	}
}
