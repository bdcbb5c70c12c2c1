// Package childtest starts a test's helper process: the test binary
// re-executed in a role (package roles), with pipes both ways, that
// never outlives the test. The tests that stop, kill or trace a process
// of their own (a lease holder stopped with SIGSTOP, a process whose
// fsync strace fails) start it here.
//
// A test kit: used by tests only, never by shipped code (the library, the
// evidence as cmd/run-experiment links it, the commands).
package childtest

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"sync"
	"testing"

	"leases/internal/roles"
	"leases/testkit/testctx"
)

// Child is a running helper process of a test.
type Child struct {
	// Cmd is the process; In its standard input; Lines its standard
	// output, line by line. Its standard error is the test binary's.
	Cmd   *exec.Cmd
	In    io.WriteCloser
	Lines *bufio.Scanner

	once    sync.Once
	waitErr error
}

// Start starts role with args as t's child. The child is killed when the
// test's bound passes (a hung child ends with the test, see package
// testctx) and when t ends, and, where the system can (Linux), when the
// test process dies.
func Start(t testing.TB, role roles.Role, args ...string) *Child {
	t.Helper()
	cmd, err := role.Command(args...)
	if err != nil {
		t.Fatal(err)
	}
	cmd.SysProcAttr = diesWithParent()
	cmd.Stderr = os.Stderr
	c := &Child{Cmd: cmd}
	if c.In, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c.Lines = bufio.NewScanner(out)
	stop := context.AfterFunc(testctx.Context(t), func() { _ = cmd.Process.Kill() })
	t.Cleanup(func() {
		stop()
		c.Kill()
	})
	return c
}

// Pid is the child's process id.
func (c *Child) Pid() int { return c.Cmd.Process.Pid }

// Wait waits for the child to exit, once, and returns how it exited.
func (c *Child) Wait() error {
	c.once.Do(func() { c.waitErr = c.Cmd.Wait() })
	return c.waitErr
}

// Kill kills the child with SIGKILL, if it still runs, and waits for it:
// once Kill returns, the child holds nothing (no file, no lock).
func (c *Child) Kill() {
	_ = c.Cmd.Process.Kill()
	_ = c.Wait()
}
