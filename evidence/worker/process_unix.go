//go:build unix && !linux

package worker

import "syscall"

// endsWithController is how a worker stopped with SIGSTOP ends when its
// controller dies, on a Unix without Linux's parent-death signal (macOS,
// the BSDs): the worker gets a process group of its own, whose only
// parent outside it is the controller. When the controller dies, the
// group is orphaned, and POSIX has the kernel send every member of an
// orphaned group that holds a stopped process SIGHUP, then SIGCONT: the
// worker wakes and dies of the hang-up (or, if it ignores SIGHUP, reads
// the end of its input and exits). A worker that runs sees its input end.
//
// What is weaker than on Linux: nothing kills a worker that is running
// but stuck (say, inside a database call that never returns) when its
// controller dies; it exits at its next read of its input.
func endsWithController(bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
