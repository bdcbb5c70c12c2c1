//go:build unix

package etcdcommand_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// interruptBound is how long after its signal an interrupted run may
// take to end. Its members, workers and directories go in well under a
// second on an idle machine; on a loaded one it took up to 1.5 s, and up
// to 2.9 s when the subtests ran in parallel, each stopping a
// three-member cluster at once, so they run one at a time. A cleanup
// that waits on the cluster takes etcd's request timeout, 5.4 s (5 s and
// two election timeouts), and more: 5.4-6.2 s with the Delete on
// context.Background() put back.
const interruptBound = 3 * time.Second

// A signal during the failover scenario ends the run within
// interruptBound: one line naming the signal, exit 3, nothing written, no
// process and no temporary directory left. A cleanup Delete with
// context.Background() waited out etcd's request timeout when the signal
// came while the cluster elected a new leader ("before-kill").
// Unix only: the command signals itself with SIGINT or SIGTERM.
func TestInterruptDuringFailover(t *testing.T) {
	for _, at := range []string{"before-kill:SIGINT", "after-kill:SIGINT", "after-kill:SIGTERM", "restart:SIGINT"} {
		t.Run(at, func(t *testing.T) {
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
			if took > interruptBound {
				t.Errorf("the run ended %v after the signal; want within %v", took, interruptBound)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("an interrupted run wrote %s", out)
			}
		})
	}
}
