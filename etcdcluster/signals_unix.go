//go:build unix

package etcdcluster

import (
	"os"
	"syscall"
)

// stop and resume send SIGSTOP and SIGCONT: the member stops at once,
// wherever it is, and its connections stay open with nobody answering.
func stop(pid int) error   { return syscall.Kill(pid, syscall.SIGSTOP) }
func resume(pid int) error { return syscall.Kill(pid, syscall.SIGCONT) }

// killedByHarness reports whether a process died of SIGKILL, which is how
// the harness ends one.
func killedByHarness(state *os.ProcessState) bool {
	ws, ok := state.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}
