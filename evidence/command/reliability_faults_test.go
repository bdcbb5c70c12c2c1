package command_test

// System calls of the command made to fail, with strace, and a temporary
// file system that is full: whatever fails, the command ends with exit 3
// and one line naming what failed or, where the fault does not matter,
// with exit 0 and results.json byte for byte; never with a process of the
// run still alive, a temporary directory left behind, or an output file
// written by a failed run. Not among the contract's 17 tests.
//
// How strace counts when=N under -f: "per syscall and per tracee"
// (strace(1)), and a tracee is a thread. when=1 fails the first such call
// of every thread of every process; a forked child is a new tracee, which
// is why execve when=2 never fires: each child calls execve once. Go moves
// goroutines between threads, so for N > 1 the call that is hit varies
// from run to run: each case says what it usually hits, and accepts every
// outcome that is right for any call it can hit.
//
// No case reaches the exploration: it runs on an in-memory database and
// makes none of these calls (traced: between the last scenario's
// directory removal and the output file there is only the runtime's own
// eventfd write). TestInterruptedCommand reaches it with a signal.

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"leases/evidence/command"
	"leases/evidence/experimenttest"
	"leases/testkit/stracetest"
)

// faultsEnv set to "all" runs every case; by default only the cases that
// end early run, a few seconds in all.
const faultsEnv = "LEASES_FAULTS"

func TestCommandUnderSyscallFaults(t *testing.T) {
	want := cleanSQLiteRun(t)
	all := os.Getenv(faultsEnv) == "all"
	cases := []struct {
		name   string
		inject string // strace's -e inject=, or "" for no strace
		tmpfs  string // size of a tmpfs mounted as the command's TMPDIR
		// names lists what the one line of a failed run may name; one of
		// them must be in it.
		names []string
		// mayPass: the fault may land where it does not matter, and exit 0
		// with results.json byte for byte is right too.
		mayPass bool
		// refused, when set, is what the one line says if the fault lands
		// on the checks made before anything runs: exit 2 is right then.
		refused string
		slow    bool // runs only with LEASES_FAULTS=all
	}{
		// The first fsync of the controller's thread: creating the first
		// scenario's database. Exit 3.
		{name: "fsync EIO, 1st", inject: "fsync:error=EIO:when=1",
			names: []string{"scenario unfenced-receiver: open", "disk I/O error"}},
		// A worker's commit, a later database's creation, or a
		// directory's fsync, which SQLite ignores: exit 3, or exit 0.
		{name: "fsync EIO, 2nd", inject: "fsync:error=EIO:when=2", slow: true, mayPass: true,
			names: []string{"disk I/O error"}},
		{name: "fsync EIO, 5th", inject: "fsync:error=EIO:when=5", slow: true, mayPass: true,
			names: []string{"disk I/O error"}},
		// Mostly the creation of the third or fourth scenario's database.
		{name: "fsync EIO, 12th", inject: "fsync:error=EIO:when=12", slow: true, mayPass: true,
			names: []string{"disk I/O error"}},
		// Creating the first database: SQLite's only write call. Exit 3.
		{name: "pwrite64 ENOSPC, 1st", inject: "pwrite64:error=ENOSPC:when=1",
			names: []string{"scenario unfenced-receiver: open", "database or disk is full"}},
		// Later in the creation: the WAL index is grown with pwrite64
		// (SQLite then says disk I/O error), or the tables' commit. Exit 3.
		{name: "pwrite64 ENOSPC, 20th", inject: "pwrite64:error=ENOSPC:when=20", slow: true,
			names: []string{"database or disk is full", "disk I/O error"}},
		// strace counts per thread: the first open of whichever thread
		// comes first. The store only stats a database file that does not
		// exist yet, so this lands on the file made beside --output to see
		// that it can be written, before anything runs (exit 2), on SQLite
		// creating the database (exit 3: the store names the directory it
		// may not create the file in, or SQLite cannot open it), on the
		// output's temporary file (exit 3, nothing written), or on an open
		// whose failure changes nothing (exit 0, results.json byte for
		// byte).
		{name: "openat EACCES, 1st", inject: "openat:error=EACCES:when=1", mayPass: true, refused: "cannot be written",
			names: []string{"the database file is not writable", "may not create a file in", "unable to open database file", "write results"}},
		// Mostly the removal of the first scenario's directory, which
		// opens its parent first: it is tried twice, so exit 0. Or the
		// database check of a later scenario, or its creation of the
		// file in the scenario's directory: exit 3.
		{name: "openat EACCES, 2nd", inject: "openat:error=EACCES:when=2", slow: true, mayPass: true,
			names: []string{"the database file is not writable", "may not create a file in", "cannot remove"}},
		// The same check in a later scenario, or a directory's removal.
		// Exit 3, or exit 0.
		{name: "openat EACCES, 3rd", inject: "openat:error=EACCES:when=3", slow: true, mayPass: true,
			names: []string{"the database file is not writable", "may not create a file in", "cannot remove"}},
		// A worker's own open of the database. Exit 3.
		{name: "openat EACCES, 9th", inject: "openat:error=EACCES:when=9", slow: true, mayPass: true,
			names: []string{"the database file is not writable"}},
		// Go's os/exec forks with clone; the first one of a thread is
		// also the runtime's pidfd probe, so it is worker B, or A, that
		// cannot be started. Exit 3.
		{name: "clone EAGAIN, 1st", inject: "clone:error=EAGAIN:when=1",
			names: []string{"start worker", "resource temporarily unavailable"}},
		{name: "clone EAGAIN, 2nd", inject: "clone:error=EAGAIN:when=2", slow: true,
			names: []string{"start worker", "resource temporarily unavailable"}},
		// New threads come from clone3, through pthread_create, which the
		// Go runtime retries on EAGAIN: it does not matter. Exit 0.
		{name: "clone3 EAGAIN, 1st", inject: "clone3:error=EAGAIN:when=1", slow: true, mayPass: true,
			names: []string{"resource temporarily unavailable"}},
		// Worker A's process, or B's (a scenario starts both at once),
		// cannot become a worker. Exit 3.
		{name: "execve EAGAIN, 1st", inject: "execve:error=EAGAIN:when=1",
			names: []string{"start worker A: fork/exec", "start worker B: fork/exec"}},
		// Never fires (see above). Exit 0.
		{name: "execve EAGAIN, 2nd", inject: "execve:error=EAGAIN:when=2", slow: true, mayPass: true,
			names: []string{"resource temporarily unavailable"}},
		// StartWorker's own pipes for worker A, or B, or os/exec's for
		// one of them: a scenario starts both at once, and which of their
		// threads calls pipe2 first varies. Exit 3.
		{name: "pipe2 EMFILE, 1st", inject: "pipe2:error=EMFILE:when=1",
			names: []string{"start worker A: pipe2: too many open files", "start worker B: pipe2: too many open files",
				"start worker A: fork/exec", "start worker B: fork/exec"}},
		// os/exec's pipes for a worker's stderr or its exec status. Exit 3.
		{name: "pipe2 EMFILE, 4th", inject: "pipe2:error=EMFILE:when=4", slow: true,
			names: []string{"start worker", "too many open files"}},
		// Waiting for a worker to stop (its pause; the pool's processes
		// serve scenario after scenario, so no worker exits before it),
		// or the runtime's pidfd probe, which expects ECHILD anyway.
		// strace counts each traced thread's calls apart, and which
		// thread of the Go runtime makes which wait is the scheduler's
		// choice: mostly exit 3, but on a busy machine the pauses' waits
		// once all came from threads past their first (exit 0).
		{name: "waitid ECHILD, 1st", inject: "waitid:error=ECHILD:when=1", mayPass: true,
			names: []string{"stop worker A: waitid: no child processes", "cannot learn its exit status: waitid: no child processes"}},
		{name: "waitid ECHILD, 2nd", inject: "waitid:error=ECHILD:when=2", slow: true, mayPass: true,
			names: []string{"stop worker A: waitid: no child processes", "cannot learn its exit status: waitid: no child processes"}},
		// A temporary file system with no room for the first database.
		// Exit 3.
		{name: "tmpfs of 4 KiB", tmpfs: "4k",
			names: []string{"scenario unfenced-receiver: open", "database or disk is full"}},
		// Room for the databases, none for worker A's first commit. Exit 3.
		{name: "tmpfs of 64 KiB", tmpfs: "64k",
			names: []string{"worker A", "database or disk is full"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.slow && !all {
				t.Skipf("slow; %s=all runs it", faultsEnv)
			}
			t.Parallel()
			var p commandProcess
			if tc.inject != "" {
				p.wrapper = []string{stracetest.Path(t), "-f", "-o", os.DevNull, "-e", "inject=" + tc.inject}
			}
			if tc.tmpfs != "" {
				p.tmpDir = mountTmpfs(t, tc.tmpfs)
			}
			outDir := t.TempDir()
			out := filepath.Join(outDir, "out.json")
			got := p.run(t, "--output", out)
			written, _ := os.ReadDir(outDir)
			switch got.code {
			case command.ExitFailed:
				if strings.Count(got.stderr, "\n") != 1 || !strings.HasPrefix(got.stderr, "run-experiment: ") || !containsAny(got.stderr, tc.names) {
					t.Fatalf("exit 3, stderr %q; want one line naming one of %q", got.stderr, tc.names)
				}
				if len(written) > 0 {
					t.Fatalf("the failed run wrote %v", written)
				}
				t.Logf("exit 3: %s", strings.TrimSpace(got.stderr))
			case command.ExitUsage:
				if tc.refused == "" || strings.Count(got.stderr, "\n") != 1 || !strings.Contains(got.stderr, tc.refused) {
					t.Fatalf("exit 2, stderr %q; want exit 3 (or 0), or exit 2 saying %q", got.stderr, tc.refused)
				}
				if len(written) > 0 {
					t.Fatalf("the refused run wrote %v", written)
				}
				t.Logf("exit 2: %s", strings.TrimSpace(got.stderr))
			case command.ExitMatch:
				if !tc.mayPass {
					t.Fatalf("exit 0 where the fault must fail the run; stderr:\n%s", got.stderr)
				}
				if data, err := os.ReadFile(out); err != nil || !bytes.Equal(data, want) || len(written) != 1 {
					t.Fatalf("exit 0, but %s is not the clean run's output byte for byte (%v), or more was written: %v", out, err, written)
				}
				t.Log("exit 0: the fault did not matter; the output is the clean run's byte for byte")
			default:
				t.Fatalf("exit %d; want 3 (or 0); stderr:\n%s", got.code, got.stderr)
			}
		})
	}
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// cleanSQLiteRun is what this test binary, playing the command on SQLite
// alone, writes without any fault: what a faulty run that exits 0 must
// write too. Its SQLite section is results.json's, byte for byte.
func cleanSQLiteRun(t *testing.T) []byte {
	t.Helper()
	experimenttest.SkipWithoutStop(t)
	out := filepath.Join(t.TempDir(), "clean.json")
	if got := (commandProcess{}).run(t, "--output", out); got.code != command.ExitMatch {
		t.Fatalf("the clean run: exit %d; stderr:\n%s", got.code, got.stderr)
	}
	clean, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var ours, committed struct {
		Backends []json.RawMessage `json:"backends"`
	}
	if err := errors.Join(json.Unmarshal(clean, &ours), json.Unmarshal(experimenttest.CommittedResults(t), &committed)); err != nil {
		t.Fatal(err)
	}
	if len(ours.Backends) != 1 || len(committed.Backends) == 0 || !bytes.Equal(ours.Backends[0], committed.Backends[0]) {
		t.Fatal("the clean run's SQLite section is not results.json's")
	}
	return clean
}
