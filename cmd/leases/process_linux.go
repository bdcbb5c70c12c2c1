package main

import "syscall"

// groupAttr: a process group of CMD's own, and the parent-death signal,
// so that CMD dies with leases if leases is killed (SIGKILL) and can no
// longer stop it: the kernel sends SIGKILL when the thread that started
// CMD ends (Go ends a thread only when a goroutine locked to it exits,
// and nothing here locks one). What CMD itself started is not reached by
// it: those processes go on without the lease, as they do elsewhere.
func groupAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
