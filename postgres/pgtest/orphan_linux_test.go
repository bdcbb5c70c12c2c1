package pgtest_test

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"leases/postgres/pgtest"
)

// A process killed with SIGKILL cannot stop its server: the server must
// die with it all the same, as pg_ctl's detached server would not.
func TestServerDiesWithItsParent(t *testing.T) {
	if err := pgtest.Installed(); err != nil {
		t.Skip(err)
	}
	parent := exec.Command(os.Args[0], "-test.run=^$")
	parent.Env = append(os.Environ(), parentRole+"=1")
	parent.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := parent.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the server's pid: %v (%q)", err, line)
	}
	var pid int
	var dir string
	if _, err := fmt.Sscan(line, &pid, &dir); err != nil {
		t.Fatalf("%q: %v", strings.TrimSpace(line), err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) }) // the killed parent could not
	if err := parent.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	deadline, ok := t.Deadline()
	if !ok {
		deadline = time.Now().Add(time.Hour) // no -timeout: a hang is the user's to see
	}
	// A tenth of the time left is kept back, so that the test says why it
	// failed before go test's timeout panics.
	if err := waitForExit(pid, deadline.Add(-time.Until(deadline)/10)); err != nil {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("postgres (pid %d) outlived the process that started it: %v", pid, err)
	}
}

// waitForExit waits until process pid has exited, which needs no
// parent-child relation: a pidfd turns readable when its process exits.
func waitForExit(pid int, deadline time.Time) error {
	const pidfdOpen = 434 // pidfd_open(2), the same on every Linux architecture
	fd, _, errno := syscall.Syscall(pidfdOpen, uintptr(pid), 0, 0)
	if errno == syscall.ESRCH {
		return nil // gone already
	}
	if errno != 0 {
		return fmt.Errorf("pidfd_open: %w", errno)
	}
	defer syscall.Close(int(fd))
	for {
		var readable syscall.FdSet
		readable.Bits[fd/64] |= 1 << (fd % 64)
		timeout := syscall.NsecToTimeval(max(0, time.Until(deadline).Nanoseconds()))
		n, err := syscall.Select(int(fd)+1, &readable, nil, nil, &timeout)
		switch {
		case errors.Is(err, syscall.EINTR):
			continue // the Go runtime's signals interrupt the wait
		case err != nil:
			return fmt.Errorf("select: %w", err)
		case n == 0:
			return errors.New("still running at the test's deadline")
		}
		return nil
	}
}
