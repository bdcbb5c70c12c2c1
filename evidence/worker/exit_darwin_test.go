package worker_test

import (
	"errors"
	"fmt"
	"syscall"
	"time"
)

// waitForExit waits until pid has exited, until deadline at most; the zero
// deadline is no bound. It needs no parent-child relation: the workers
// here belong to a controller that is already dead. On macOS it waits for
// the process's NOTE_EXIT event on a kqueue.
func waitForExit(pid int, deadline time.Time) error {
	kq, err := syscall.Kqueue()
	if err != nil {
		return fmt.Errorf("kqueue: %w", err)
	}
	defer syscall.Close(kq)
	var change syscall.Kevent_t
	syscall.SetKevent(&change, pid, syscall.EVFILT_PROC, syscall.EV_ADD|syscall.EV_ONESHOT)
	change.Fflags = syscall.NOTE_EXIT
	events := make([]syscall.Kevent_t, 1)
	for {
		var timeout *syscall.Timespec // nil: no bound
		if !deadline.IsZero() {
			left := syscall.NsecToTimespec(max(0, time.Until(deadline).Nanoseconds()))
			timeout = &left
		}
		n, err := syscall.Kevent(kq, []syscall.Kevent_t{change}, events, timeout)
		switch {
		case errors.Is(err, syscall.EINTR):
			continue // the Go runtime's signals interrupt the wait
		case errors.Is(err, syscall.ESRCH):
			return nil // already gone
		case err != nil:
			return fmt.Errorf("kevent: %w", err)
		case n == 0:
			return errors.New("still running at the deadline")
		case events[0].Flags&syscall.EV_ERROR != 0 && syscall.Errno(events[0].Data) == syscall.ESRCH:
			return nil // already gone
		case events[0].Flags&syscall.EV_ERROR != 0:
			return fmt.Errorf("kevent: %w", syscall.Errno(events[0].Data))
		}
		return nil // NOTE_EXIT: the process has exited
	}
}
