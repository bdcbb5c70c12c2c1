package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"leases/sqlite"
	"leases/testkit/stracetest"
	"leases/testkit/testctx"
)

// An acquire whose commit fails (strace makes the write-ahead log's fsync
// fail with EIO) is an unknown outcome, not a plain failure: exit 3, and
// the one line says "outcome unknown" and which lease may be live until
// when (whether it took effect is the file's to say: see the root
// module's TestFailedCommitIsAnUnknownOutcome).
func TestAcquireWithAnUnknownOutcome(t *testing.T) {
	strace := stracetest.Path(t)
	ctx := testctx.Context(t)
	db := sqliteFile(t)
	// The keeper holds the file open with a change in the log, so that
	// the command's commit appends to a log that exists: the first fsync
	// of the log is then the commit's.
	keeper, err := sqlite.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer keeper.Close()
	if _, err := keeper.Lessor().Acquire(ctx, "keeper", "K", time.Hour); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, strace, "-f", "-o", "/dev/null", "-P", db+"-wal", "-e", "trace=fsync", "-e", "inject=fsync:error=EIO",
		exe, asCommand, "acquire", "r", "--sqlite", db, "--holder", "h", "--ttl", "1h")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("acquire under strace: %v; stderr %q", err, stderr.String())
	}
	if strings.Contains(stderr.String(), "Operation not permitted") {
		t.Skipf("strace may not trace here: %s", stderr.String())
	}
	line := stderr.String()
	if exit.ExitCode() != exitFailed || stdout.Len() != 0 || strings.Count(line, "\n") != 1 ||
		!strings.HasPrefix(line, `leases: acquire: outcome unknown: assume "r" may be held by "h" at epoch 1 until `) {
		t.Fatalf("acquire with a failing fsync: exit %d, stdout %q, stderr %q; want 3 and one line saying the outcome is unknown",
			exit.ExitCode(), stdout.String(), line)
	}
}
