package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"leases/internal/stopwait"
)

// Crash kills the server as a machine's power cut or an out-of-memory
// kill of its whole group would: the postmaster and every backend it
// forked get SIGKILL at once, no checkpoint is written and no client is
// told. It returns once every one of those processes has exited (bounded
// by ctx), so that Restart finds the shared memory detached. What the
// server committed survives: with fsync=off it sits in the page cache,
// which no process's death loses.
//
// Linux only: it finds the backends in /proc and waits for each through
// a pidfd (Linux 5.3 or later).
func (s *Server) Crash(ctx context.Context) error {
	select {
	case <-s.exited:
		return errors.New("pgtest: crash: the server is not running")
	default:
	}
	postmaster := s.cmd.Process.Pid
	// Stopped, the postmaster forks no backend between the listing and
	// the kill, so none escapes it. kill(2) returns before the process has
	// stopped: a fork under way then still completes, and its backend,
	// missed by the listing, outlived a crash and held the shared memory
	// that Restart needs. So the listing waits until the kernel reports
	// the postmaster stopped.
	if err := syscall.Kill(postmaster, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("pgtest: crash: stop the postmaster: %w", err)
	}
	if err := stopwait.Stopped(postmaster); err != nil {
		return fmt.Errorf("pgtest: crash: stop the postmaster: %w", err)
	}
	backends, err := childrenOf(postmaster)
	var pidfds []int
	for _, pid := range backends {
		fd, err2 := pidfdOpen(pid)
		if errors.Is(err2, syscall.ESRCH) {
			continue // exited already
		}
		if err2 != nil {
			err = errors.Join(err, err2)
			continue
		}
		pidfds = append(pidfds, fd)
	}
	defer func() {
		for _, fd := range pidfds {
			_ = syscall.Close(fd)
		}
	}()
	err = errors.Join(err, s.cmd.Process.Kill())
	for _, fd := range pidfds {
		err = errors.Join(err, pidfdKill(fd))
	}
	select {
	case <-s.exited:
	case <-ctx.Done():
		return fmt.Errorf("pgtest: crash: the postmaster did not exit: %w", context.Cause(ctx))
	}
	for _, fd := range pidfds {
		err = errors.Join(err, awaitExit(ctx, fd))
	}
	if err != nil {
		return fmt.Errorf("pgtest: crash: %w", err)
	}
	return nil
}

// Restart starts the server again on the same data directory, with the
// same settings, after Crash (or after it exited for any other reason),
// and waits until it accepts connections: after a crash, once it has
// replayed its log. Neither Restart nor Crash may run at the same time as
// another of the server's methods.
func (s *Server) Restart(ctx context.Context) error {
	select {
	case <-s.exited:
	default:
		return errors.New("pgtest: restart: the server is still running")
	}
	began := time.Now()
	notify, err := listenNotify()
	if err != nil {
		return err
	}
	defer notify.Close()
	logFile, err := os.OpenFile(filepath.Join(s.dir, "postgres.log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close() // the child has its own descriptor
	old := s.cmd
	cmd := exec.Command(old.Path, old.Args[1:]...)
	cmd.Dir = old.Dir
	for _, kv := range old.Env {
		if !strings.HasPrefix(kv, "NOTIFY_SOCKET=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "NOTIFY_SOCKET="+notify.LocalAddr().String())
	cmd.SysProcAttr = old.SysProcAttr
	cmd.Stdout, cmd.Stderr = logFile, logFile
	exited := make(chan struct{})
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgtest: restart: %w", err)
	}
	s.cmd, s.exited, s.waitErr = cmd, exited, nil
	go func() {
		s.waitErr = cmd.Wait()
		close(exited)
	}()
	ready := make(chan error, 1)
	go func() { ready <- awaitReady(notify) }()
	select {
	case err = <-ready:
	case <-exited:
		err = fmt.Errorf("postgres exited before it was ready (%v): %s", s.waitErr, lastLines(s.Log(), 5))
	case <-ctx.Done():
		err = fmt.Errorf("waiting for postgres to be ready: %w", context.Cause(ctx))
	}
	if err != nil {
		return fmt.Errorf("pgtest: restart: %w", err)
	}
	s.Started = time.Since(began)
	return nil
}

// childrenOf lists the processes whose parent is pid, from /proc.
func childrenOf(pid int) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var children []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // exited meanwhile
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses,
		// so read from the last ')'.
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			children = append(children, child)
		}
	}
	return children, nil
}

// Linux's pidfd system calls, which package syscall does not name; the
// numbers are the same on every architecture.
const (
	sysPidfdSendSignal = 424
	sysPidfdOpen       = 434
)

func pidfdOpen(pid int) (int, error) {
	fd, _, errno := syscall.Syscall(sysPidfdOpen, uintptr(pid), 0, 0)
	if errno != 0 {
		return -1, fmt.Errorf("pidfd_open %d: %w", pid, errno)
	}
	return int(fd), nil
}

func pidfdKill(fd int) error {
	_, _, errno := syscall.Syscall6(sysPidfdSendSignal, uintptr(fd), uintptr(syscall.SIGKILL), 0, 0, 0, 0)
	if errno != 0 && errno != syscall.ESRCH {
		return fmt.Errorf("pidfd_send_signal: %w", errno)
	}
	return nil
}

// awaitExit blocks until the process of pidfd has exited (a pidfd becomes
// readable then), or until ctx's deadline.
func awaitExit(ctx context.Context, fd int) error {
	var timeout *syscall.Timespec
	if deadline, ok := ctx.Deadline(); ok {
		ts := syscall.NsecToTimespec(max(0, time.Until(deadline).Nanoseconds()))
		timeout = &ts
	}
	type pollFd struct {
		fd      int32
		events  int16
		revents int16
	}
	const pollIn = 0x1
	fds := []pollFd{{fd: int32(fd), events: pollIn}}
	for {
		n, _, errno := syscall.Syscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&fds[0])), 1,
			uintptr(unsafe.Pointer(timeout)), 0, 0, 0)
		switch {
		case errno == syscall.EINTR:
			continue // the Go runtime's signals interrupt the wait
		case errno != 0:
			return fmt.Errorf("ppoll: %w", errno)
		case n == 0:
			return fmt.Errorf("a backend did not exit: %w", context.Cause(ctx))
		}
		return nil
	}
}
