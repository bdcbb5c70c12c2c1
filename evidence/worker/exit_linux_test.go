package worker_test

import (
	"errors"
	"fmt"
	"syscall"
	"time"
)

// pidfdOpen is pidfd_open(2)'s number, the same on every Linux
// architecture; the syscall package does not name it.
const pidfdOpen = 434

// waitForExit waits until pid has exited (a zombie or gone), until
// deadline at most; the zero deadline is no bound. It needs no
// parent-child relation: the workers here belong to a controller that is
// already dead. On Linux it waits on the process's pidfd.
func waitForExit(pid int, deadline time.Time) error {
	fd, _, errno := syscall.Syscall(pidfdOpen, uintptr(pid), 0, 0)
	if errno == syscall.ESRCH {
		return nil // already gone and reaped
	}
	if errno != 0 {
		return fmt.Errorf("pidfd_open: %w", errno)
	}
	pidfd := int(fd)
	defer syscall.Close(pidfd)
	epoll, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return fmt.Errorf("epoll_create1: %w", err)
	}
	defer syscall.Close(epoll)
	event := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(pidfd)}
	if err := syscall.EpollCtl(epoll, syscall.EPOLL_CTL_ADD, pidfd, &event); err != nil {
		return fmt.Errorf("epoll_ctl: %w", err)
	}
	for {
		msec := -1 // no bound
		if !deadline.IsZero() {
			msec = int(max(0, time.Until(deadline).Milliseconds())) + 1
		}
		n, err := syscall.EpollWait(epoll, make([]syscall.EpollEvent, 1), msec)
		if errors.Is(err, syscall.EINTR) {
			continue // the Go runtime's signals interrupt the wait
		}
		if err != nil {
			return fmt.Errorf("epoll_wait: %w", err)
		}
		if n == 0 {
			return errors.New("still running at the deadline")
		}
		return nil // readable: the process has exited
	}
}
