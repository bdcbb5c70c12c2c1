package worker

import "syscall"

// endsWithController is how a worker stopped with SIGSTOP ends when its
// controller dies, on Linux. Two defences, either enough alone:
//
//   - the parent-death signal: the kernel sends the worker SIGKILL when the
//     thread that started it ends (Go ends a thread only when a goroutine
//     locked to it exits, and nothing here locks one);
//   - a process group of the worker's own, as on every Unix (see
//     process_unix.go): once the controller is gone, the group is
//     orphaned and the kernel sends its stopped members SIGHUP and SIGCONT.
//
// groupOnly leaves out the first, to test the second alone.
func endsWithController(groupOnly bool) *syscall.SysProcAttr {
	if groupOnly {
		return &syscall.SysProcAttr{Setpgid: true}
	}
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
