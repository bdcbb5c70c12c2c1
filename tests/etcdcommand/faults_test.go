package etcdcommand_test

import (
	"bytes"
	"leases/testkit/stracetest"
	"os"
	"path/filepath"
	"testing"
)

// A member whose system calls fail (strace on that member alone) fails,
// and the run with it: exit 3, one line naming the member, nothing
// written, no process and no temporary directory left.
func TestMemberFaultsEndTheRun(t *testing.T) {
	strace := stracetest.Path(t)
	cases := []struct {
		name   string
		inject string
		names  []string
	}{
		// etcd's WAL bootstrap fsyncs its directory even with
		// UnsafeNoFsync, and then uses the WAL it failed to create: the
		// member panics (nil pointer) before it is ready.
		{"fsync EIO, 1st", "fsync:error=EIO:when=1", []string{"member m0"}},
		// Creating the member's database (bbolt): it exits before it
		// is ready.
		{"pwrite64 ENOSPC, 1st", "pwrite64:error=ENOSPC:when=1", []string{"member m0"}},
		{"pwrite64 ENOSPC, 3rd", "pwrite64:error=ENOSPC:when=3", []string{"member m0"}},
		// From the 3rd on: at the latest creating the snapshot
		// directory (a fatal log line, exit 1). Not the 3rd alone: which
		// write is 3rd depends on the scheduler (the Go runtime's
		// netpollBreak writes too), and a loaded machine once made it
		// one whose failure the member survived, and the run exited 0.
		{"write ENOSPC, 3rd on", "write:error=ENOSPC:when=3+", []string{"member m0"}},
		// From the 10th on: a commit of the member's database ("fatal
		// failed to commit tx"), every later one failing too. The member exits; the
		// others could go on, but the run ends at once, naming it. (The
		// 30th on, as it was: a member makes 49 to 85 pwrite64 calls in
		// a run, counted with strace -c, and the faster run of the
		// pooled workers could end before the first failing one.)
		{"pwrite64 ENOSPC, 10th on", "pwrite64:error=ENOSPC:when=10+", []string{"member m0"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out := filepath.Join(t.TempDir(), "out.json")
			got := run{env: []string{wrapEnv + "=" + quoteWords(strace, "-f", "-o", os.DevNull, "-e", "inject="+tc.inject)}}.start(t, "--output", out)
			t.Logf("exit %d: %s", got.code, bytes.TrimSpace([]byte(got.stderr)))
			oneLine(t, got, tc.names...)
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Fatalf("the failed run wrote %s", out)
			}
		})
	}
}
