//go:build linux || darwin

package worker

import (
	"os"
	"syscall"

	"leases/internal/stopwait"
)

var canStop error // Stop works here

func sendStop(p *os.Process) error     { return p.Signal(syscall.SIGSTOP) }
func sendContinue(p *os.Process) error { return p.Signal(syscall.SIGCONT) }

// waitStopped waits until the kernel reports the child stopped (or
// exited instead).
func waitStopped(pid int) error { return stopwait.Stopped(pid) }
