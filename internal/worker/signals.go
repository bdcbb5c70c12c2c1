package worker

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"unsafe"
)

// Stop pauses the worker with SIGSTOP, as a process is paused by a long
// garbage collection or a descheduled virtual machine, and waits, bounded
// by ctx, until the kernel reports every thread of it stopped. Sending the
// signal is not enough: a thread already running finishes its time slice
// first, and a request written to the worker in that window could still
// begin. After Stop returns the worker runs no instruction until Continue
// (or Kill, which ends a stopped worker as well).
func (w *Worker) Stop(ctx context.Context) error {
	if err := w.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return fmt.Errorf("stop worker %s: %w", w.name, err)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- waitStopped(w.cmd.Process.Pid) }()
	select {
	case <-ctx.Done():
		return fmt.Errorf("worker %s did not stop: %w", w.name, context.Cause(ctx))
	case err := <-stopped:
		if err != nil {
			return fmt.Errorf("stop worker %s: %w%s", w.name, err, w.stderr.saying())
		}
		return nil
	}
}

// Continue resumes a stopped worker with SIGCONT.
func (w *Worker) Continue() error {
	if err := w.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		return fmt.Errorf("continue worker %s: %w", w.name, err)
	}
	return nil
}

// waitid's arguments and the si_code values it reports; the syscall
// package names the options but not the rest.
const (
	idPID      = 1 // P_PID
	cldStopped = 5 // CLD_STOPPED
)

// waitStopped blocks until the child pid is stopped or has exited. With
// WNOWAIT nothing is collected: an exit stays for the child's reaper
// (exec.Cmd.Wait), and the kernel reports a stop only while the child is
// stopped, so the next Stop after a Continue waits for the new stop.
func waitStopped(pid int) error {
	// siginfo_t is 128 bytes; si_code is the third int.
	var info [128]byte
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, idPID, uintptr(pid), uintptr(unsafe.Pointer(&info[0])),
			syscall.WSTOPPED|syscall.WEXITED|syscall.WNOWAIT, 0, 0)
		if errno == syscall.EINTR {
			continue // the Go runtime's signals interrupt the wait
		}
		if errno != 0 {
			return fmt.Errorf("waitid: %w", errno)
		}
		if code := *(*int32)(unsafe.Pointer(&info[8])); code != cldStopped {
			return errors.New("it exited instead of stopping")
		}
		return nil
	}
}
