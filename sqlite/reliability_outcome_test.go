package sqlite_test

// Commits that fail: an error after COMMIT was sent is an unknown outcome,
// not "nothing changed". Not among the contract's 17 tests.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"leases"
	"leases/evidence/backend"
	"leases/evidence/experimenttest"
	"leases/evidence/worker"
	"leases/sqlite"
	"leases/testkit/sqlitetest"
	"leases/testkit/stracetest"
	"leases/testkit/testctx"
)

// A commit whose fsync fails has already put the change in the write-ahead
// log. The store must say the outcome is unknown and then refuse to answer
// from its own view, because the next process to open the file finds the
// change: measured here, the failing process itself would still read the
// old value.
func TestFailedCommitIsAnUnknownOutcome(t *testing.T) {
	cases := []struct {
		name string
		// act is the victim's operation, whose commit fails.
		act func(ctx context.Context, w *worker.Worker) error
		// took checks, on a fresh store after every process has died
		// without closing the file, that the failed operation took effect.
		took func(t *testing.T, s *sqlite.Store)
	}{
		{"write",
			func(ctx context.Context, w *worker.Worker) error {
				_, err := w.Write(ctx, leases.Fenced, "r", 2, "v2-FAILED")
				return err
			},
			func(t *testing.T, s *sqlite.Store) {
				if got, _, err := s.Receiver(leases.Fenced).Read(context.Background(), "r"); err != nil || got != written(2, "v2-FAILED") {
					t.Fatalf("after the failed write the file holds %+v, %v; want the failed write's value", got, err)
				}
			}},
		{"acquire",
			func(ctx context.Context, w *worker.Worker) error {
				_, err := w.Acquire(ctx, "other", 0, 5)
				return err
			},
			func(t *testing.T, s *sqlite.Store) {
				_, err := s.Authority().Acquire(context.Background(), "other", "N", 4, 5)
				if !errors.Is(err, leases.ErrLeaseHeld) || !strings.Contains(err.Error(), `"V" until tick 5`) {
					t.Fatalf("after the failed acquire: %v; want the lease it was told it did not get, live until tick 5", err)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testctx.Context(t)
			path := sqlitetest.Path(t)
			if err := sqlitetest.Open(t, path).Close(); err != nil { // creates the tables; the log is gone again
				t.Fatal(err)
			}
			// The keeper holds the file open with a change in the log, so
			// that the victim's commit appends to a log that exists: its
			// first fsync of the log is then the commit's.
			keeper := experimenttest.StartWorker(t, ctx, "K", path)
			if got, err := keeper.Write(ctx, leases.Fenced, "r", 1, "v1"); err != nil || got.Outcome != leases.Accepted {
				t.Fatalf("keeper's write: %+v, %v", got, err)
			}
			victim := experimenttest.StartWorker(t, ctx, "V", path)
			attachStrace(t, ctx, victim.PID(), "-P", path+"-wal", "-e", "trace=fsync", "-e", "inject=fsync:error=EIO")

			err := tc.act(ctx, victim)
			if err == nil || !strings.Contains(err.Error(), leases.ErrOutcomeUnknown.Error()) {
				t.Fatalf("victim's %s with a failing fsync: %v; want %q, not a plain failure", tc.name, err, leases.ErrOutcomeUnknown)
			}
			if _, _, err := victim.Read(ctx, backend.Fenced, "r"); err == nil || !strings.Contains(err.Error(), sqlite.ErrReopenRequired.Error()) {
				t.Fatalf("the victim's store read after the unknown outcome: %v; want %q", err, sqlite.ErrReopenRequired)
			}
			// Both die without closing the file, as a crashed process does.
			keeper.Kill()
			victim.Kill()
			after := sqlitetest.Open(t, path)
			tc.took(t, after)
			if check, err := after.IntegrityCheck(ctx); err != nil || check != "ok" {
				t.Fatalf("integrity_check: %q, %v", check, err)
			}
		})
	}
}

// attachStrace attaches strace to the running process pid with the given
// filter and injection arguments, and returns once strace says it is
// attached: from then on every matching system call of pid is tampered
// with. The test skips, in one line, where strace is missing or may not
// attach.
func attachStrace(t *testing.T, ctx context.Context, pid int, args ...string) {
	t.Helper()
	path := stracetest.Path(t)
	cmd := exec.CommandContext(ctx, path, append([]string{"-f", "-o", "/dev/null", "-p", fmt.Sprint(pid)}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := bufio.NewScanner(stderr)
	for lines.Scan() {
		if strings.Contains(lines.Text(), "attached") {
			go func() { // strace has more to say only when it ends
				for lines.Scan() {
				}
			}()
			return
		}
		if strings.Contains(lines.Text(), "Operation not permitted") {
			t.Skipf("strace may not attach here: %s", lines.Text())
		}
	}
	t.Fatalf("strace ended before attaching to %d: %v", pid, lines.Err())
}
