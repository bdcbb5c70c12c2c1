package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"leases/testkit/stracetest"
	"leases/testkit/testctx"
)

// withoutPermission runs the command with args as a process of its own
// under strace, which fails each openat of path with EACCES: what a
// directory the process may not write gives the creation of the file.
func withoutPermission(t *testing.T, path string, args []string) result {
	t.Helper()
	strace := stracetest.Path(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(testctx.Context(t), strace, append([]string{"-f", "-o", os.DevNull, "-P", path,
		"-e", "trace=openat", "-e", "inject=openat:error=EACCES", exe, asCommand}, args...)...)
	cmd.Env = withoutStoreEnv(os.Environ())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("the command under strace: %v; stderr %q", err, stderr.String())
	}
	if strings.Contains(stderr.String(), "Operation not permitted") {
		t.Skipf("strace may not trace here: %s", stderr.String())
	}
	return result{Code: cmd.ProcessState.ExitCode(), Stdout: stdout.String(), Stderr: stderr.String()}
}
