package etcdcommand_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"leases/cmd/run-experiment/etcdbackend"
	"leases/etcdcluster"
	"leases/evidence/backend"
	"leases/evidence/command"
	"leases/evidence/worker"
	"leases/internal/roles"
	"leases/testkit/testctx"
)

// Environment of the command role, set by the test that starts it.
const (
	// wrapEnv is a JSON array of words to put in front of member 0's
	// command (strace and its options).
	wrapEnv = "LEASES_TEST_WRAP_MEMBER0"
	// interruptEnv makes the command signal itself during the failover
	// scenario, as POINT:SIGNAL (see interruptingKind).
	interruptEnv = "LEASES_TEST_INTERRUPT_FAILOVER"
)

// commandRole is the command run-experiment on etcd alone, as its main
// runs it (command.Command), with the test's faults.
var commandRole = roles.Register("etcdcommand-test-command", func([]string) int {
	return command.Command(commandKinds()...)
})

// commandKinds is the etcd backend, with member 0 wrapped and the
// failover interrupted as the environment asks.
func commandKinds() []backend.Driver {
	var driver etcdbackend.Backend
	if words := os.Getenv(wrapEnv); words != "" {
		var wrap []string
		if err := json.Unmarshal([]byte(words), &wrap); err != nil {
			panic(err)
		}
		driver.Wrap = func(member int) []string {
			if member == 0 {
				return wrap
			}
			return nil
		}
	}
	if at := os.Getenv(interruptEnv); at != "" {
		return []backend.Driver{interruptingKind(driver, at)}
	}
	return []backend.Driver{driver}
}

// TestMain lets this binary play an etcd member, the command, and a
// worker of the command's run (package roles).
func TestMain(m *testing.M) {
	workerRole := worker.Register(commandKinds()...)
	roles.Run()
	// The command's process starts the members and the workers, not this one.
	etcdcluster.MemberRole.MaySkip()
	workerRole.MaySkip()
	os.Exit(roles.CheckUnused(m.Run()))
}

// run is one run of the command as a child process.
type run struct {
	env []string // KEY=value entries added to its environment
	// tmpDir is its TMPDIR, which the caller checks; when empty, a fresh
	// directory that must be empty after the run.
	// marked, when set, is called with the time at which the command
	// wrote its first line to the marker pipe (fd 4 in the command).
	marked func(at time.Time)
	tmpDir string
}

// exit is how a run ended.
type exit struct {
	code   int
	stderr string
	at     time.Time // when the command's process exited
}

// start runs the command with args and returns once every process of
// the run (the command, its workers, its members) has exited; it fails
// the test if one has not, or if the run left anything in its TMPDIR.
func (r run) start(t *testing.T, args ...string) exit {
	t.Helper()
	ctx := testContext(t)
	args = append([]string{"--timeout", testctx.Bound(t).String()}, args...)
	cmd, err := commandRole.Command(args...)
	if err != nil {
		t.Fatal(err)
	}
	tmp, checkTmp := r.tmpDir, r.tmpDir == ""
	if checkTmp {
		tmp = t.TempDir()
	}
	cmd.Env = append(append(cmd.Env, "TMPDIR="+tmp), r.env...)
	// Every process that inherits heldByEveryone holds it open; allGone
	// reaches end-of-file only once all of them have exited.
	allGone, heldByEveryone, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer allGone.Close()
	marker, markerEnd, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer marker.Close()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.ExtraFiles = []*os.File{heldByEveryone, markerEnd}
	setProcessGroup(cmd)
	err = cmd.Start()
	heldByEveryone.Close()
	markerEnd.Close()
	if err != nil {
		t.Fatal(err)
	}
	marks := make(chan time.Time, 1)
	go func() {
		if _, err := marker.Read(make([]byte, 1)); err == nil {
			marks <- time.Now()
		}
		close(marks)
	}()
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err = <-waited:
	case <-ctx.Done():
		killGroup(cmd)
		<-waited
		t.Fatalf("the command did not end by itself; stderr:\n%s", stderr.String())
	}
	exited := time.Now()
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		t.Fatal(err)
	}
	if at, ok := <-marks; ok && r.marked != nil {
		r.marked(at)
	}
	deadline, _ := ctx.Deadline()
	if err := allGone.SetReadDeadline(deadline); err != nil {
		t.Fatal(err)
	}
	if n, err := allGone.Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) {
		killGroup(cmd)
		t.Fatalf("a process of the run outlived the command: waiting for all to exit got %d bytes, %v", n, err)
	}
	if left, err := os.ReadDir(tmp); checkTmp && (err != nil || len(left) > 0) {
		t.Errorf("the run left %v in its TMPDIR (%v)", names(left), err)
	}
	return exit{code: cmd.ProcessState.ExitCode(), stderr: stderr.String(), at: exited}
}

func names(entries []os.DirEntry) []string {
	var list []string
	for _, e := range entries {
		list = append(list, e.Name())
	}
	return list
}

// oneLine fails the test unless stderr is exactly one line of the
// command's, naming one of names.
func oneLine(t *testing.T, got exit, names ...string) {
	t.Helper()
	if got.code != command.ExitFailed {
		t.Fatalf("exit %d; want %d; stderr:\n%s", got.code, command.ExitFailed, got.stderr)
	}
	if strings.Count(got.stderr, "\n") != 1 || !strings.HasPrefix(got.stderr, "run-experiment: ") {
		t.Fatalf("stderr %q; want one line of the command's", got.stderr)
	}
	for _, name := range names {
		if strings.Contains(got.stderr, name) {
			return
		}
	}
	t.Fatalf("stderr %q names none of %q", got.stderr, names)
}

func testContext(t *testing.T) context.Context { return testctx.Context(t) }

func quoteWords(words ...string) string {
	text, _ := json.Marshal(words)
	return string(text)
}
