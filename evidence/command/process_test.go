package command_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"testing"

	"leases/testkit/testctx"
)

// commandExit is how a run of the command as a child process ended.
type commandExit struct {
	code           int
	stdout, stderr string
}

// commandProcess is how to run this test binary as the command
// run-experiment (see commandRole), in a process of its own.
type commandProcess struct {
	wrapper []string // words in front of the command: strace and its options
	env     []string // KEY=value entries added to its environment
	tmpDir  string   // its TMPDIR; a fresh directory when empty
}

// run runs the command with args and returns once every process of the run
// has exited; it fails the test if one has not or if the run left anything
// in its TMPDIR.
func (p commandProcess) run(t *testing.T, args ...string) commandExit {
	t.Helper()
	ctx := testctx.Context(t)
	role, err := commandRole.Command(append([]string{"--timeout", testctx.Bound(t).String()}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	argv := append(append([]string(nil), p.wrapper...), role.Args...)
	tmp := p.tmpDir
	if tmp == "" {
		tmp = t.TempDir()
	}
	// Every process that inherits allGone's write end holds it open; its
	// read end reaches end-of-file only once all of them have exited.
	allGone, heldByEveryone, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer allGone.Close()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(append(role.Env, "TMPDIR="+tmp), p.env...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.ExtraFiles = []*os.File{heldByEveryone} // not close-on-exec: every descendant inherits it
	// A hung run is ended whole (see inOwnProcessGroup).
	inOwnProcessGroup(cmd)
	err = cmd.Start()
	heldByEveryone.Close()
	if err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) || ctx.Err() != nil {
		t.Fatalf("the command did not end by itself: %v; stderr:\n%s", err, stderr.String())
	}
	deadline, _ := ctx.Deadline()
	if err := allGone.SetReadDeadline(deadline); err != nil {
		t.Fatal(err)
	}
	if n, err := allGone.Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) {
		_ = killProcessGroup(cmd)
		t.Fatalf("a process of the run outlived the command: waiting for all to exit got %d bytes, %v", n, err)
	}
	if left, err := os.ReadDir(tmp); err != nil || len(left) > 0 {
		t.Errorf("the run left %v in its TMPDIR (%v)", left, err)
	}
	return commandExit{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
}
