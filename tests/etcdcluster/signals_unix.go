//go:build unix

package etcdcluster

import "syscall"

// stop and resume send SIGSTOP and SIGCONT: the member stops at once,
// wherever it is, and its connections stay open with nobody answering.
func stop(pid int) error   { return syscall.Kill(pid, syscall.SIGSTOP) }
func resume(pid int) error { return syscall.Kill(pid, syscall.SIGCONT) }
