package main

import "syscall"

// groupAttr: CMD in the process group pgid (its watchdog's), and the
// parent-death signal, so that CMD dies with leases if leases is killed
// (SIGKILL) at once, even before its watchdog has read the end of its
// input: the kernel sends SIGKILL when the thread that started CMD ends
// (Go ends a thread only when a goroutine locked to it exits, and nothing
// here locks one). What CMD itself started is the watchdog's to kill.
func groupAttr(pgid int) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pgid: pgid, Pdeathsig: syscall.SIGKILL}
}
