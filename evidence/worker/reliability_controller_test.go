package worker_test

// A controller killed under its workers. Not among the contract's 17 tests.

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"leases/evidence/experimenttest"
	"leases/testkit/sqlitetest"
	"leases/testkit/testctx"
)

// The controller killed while its workers wait for commands: every worker
// exits (its stdin reaches end-of-file, or, for one paused with SIGSTOP,
// the system ends it), and none is left behind. A paused worker is ended
// by the kernel's parent-death signal, which only Linux has, and by the
// hang-up that every Unix sends to a stopped process group orphaned by its
// controller's death; the second subtest shows the group alone suffices,
// as it must on macOS.
func TestControllerKilledLeavesNoWorker(t *testing.T) {
	experimenttest.SkipWithoutStop(t)
	t.Run("every defence of this system", func(t *testing.T) { killControllerUnderWorkers(t) })
	t.Run("the process group alone, as on macOS", func(t *testing.T) {
		killControllerUnderWorkers(t, groupOnlyEnv+"=1")
	})
}

// killControllerUnderWorkers starts a controller (this binary in the
// controller role, with env added to its environment; see main_test.go) that starts two
// workers and pauses one of them, kills the controller, and fails t
// unless both workers exit.
func killControllerUnderWorkers(t *testing.T, env ...string) {
	ctx := testctx.Context(t)
	path := sqlitetest.Path(t)
	sqlitetest.Open(t, path)
	// Every process that inherits allGone's write end holds it open; its
	// read end reaches end-of-file only once all of them have exited.
	allGone, heldByEveryone, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer allGone.Close()
	controller, err := controllerRole.Command(path)
	if err != nil {
		t.Fatal(err)
	}
	controller.Env = append(controller.Env, env...)
	controller.ExtraFiles = []*os.File{heldByEveryone} // not close-on-exec: the workers inherit it too
	out, err := controller.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	controllerIn, err := controller.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer controllerIn.Close()
	if err := controller.Start(); err != nil {
		t.Fatal(err)
	}
	// A controller that hangs is ended at the test's bound.
	defer context.AfterFunc(ctx, func() { _ = controller.Process.Kill() })()
	heldByEveryone.Close()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("controller said %q: %v", line, err)
	}
	var pids []int
	for _, field := range strings.Fields(line) {
		pid, err := strconv.Atoi(field)
		if err != nil {
			t.Fatalf("controller said %q", line)
		}
		pids = append(pids, pid)
	}
	t.Cleanup(func() {
		// Only when the test has failed: end the workers it waited for in vain.
		for _, pid := range pids {
			if waitForExit(pid, time.Now()) != nil {
				_ = experimenttest.SignalProcess(pid, os.Kill)
			}
		}
	})

	// The first worker is paused, and has stopped, by the time the
	// controller says the pids: a stopped process cannot read the end of
	// its input, and only the system can end it. (Stopped, not only sent
	// SIGSTOP: the kernel hangs up a group orphaned with a member stopped,
	// not one still on its way to stopping.)
	if err := controller.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = controller.Wait()
	deadline, _ := testctx.Deadline(t) // none: the zero time, no bound
	if err := allGone.SetReadDeadline(deadline); err != nil {
		t.Fatal(err)
	}
	if n, err := allGone.Read(make([]byte, 1)); n != 0 || !errors.Is(err, os.ErrClosed) && !errors.Is(err, io.EOF) {
		t.Fatalf("waiting for the workers to exit: %d bytes, %v", n, err)
	}
	// Closing its files is one of the last things an exiting process does,
	// not the last: wait for each worker's whole exit (waitForExit).
	for _, pid := range pids {
		if err := waitForExit(pid, deadline); err != nil {
			t.Errorf("worker %d outlived its controller: %v", pid, err)
		}
	}
}
