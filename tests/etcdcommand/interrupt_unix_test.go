//go:build unix

package etcdcommand_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A signal during the failover scenario ends the run within a second:
// one line naming the signal, exit 3, nothing written, no process and no
// temporary directory left. Before members were processes, a cleanup
// Delete with context.Background() waited out etcd's request timeout
// (5.4 s) when the signal came while the cluster elected a new leader.
// Unix only: the command signals itself with SIGINT or SIGTERM.
func TestInterruptDuringFailover(t *testing.T) {
	for _, at := range []string{"before-kill:SIGINT", "after-kill:SIGINT", "after-kill:SIGTERM", "restart:SIGINT"} {
		t.Run(at, func(t *testing.T) {
			t.Parallel()
			out := filepath.Join(t.TempDir(), "out.json")
			var signalled time.Time
			got := run{env: []string{interruptEnv + "=" + at}, marked: func(at time.Time) { signalled = at }}.start(t, "--output", out)
			_, sig, _ := strings.Cut(at, ":")
			want := "run-experiment: interrupted by " + sig + "\n"
			if got.code != 3 || got.stderr != want {
				t.Fatalf("exit %d, stderr %q; want exit 3 and %q", got.code, got.stderr, want)
			}
			if signalled.IsZero() {
				t.Fatal("the failover scenario never signalled")
			}
			took := got.at.Sub(signalled)
			t.Logf("from the signal to the command's exit: %v", took)
			if took > time.Second {
				t.Errorf("the run ended %v after the signal; want within a second", took)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("an interrupted run wrote %s", out)
			}
		})
	}
}
