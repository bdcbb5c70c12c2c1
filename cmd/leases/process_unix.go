//go:build unix

package main

import (
	"os"
	"os/exec"
	"syscall"
)

// forwardedSignals are passed on to CMD's process group: CMD leads a
// group of its own, so a terminal's Ctrl-C reaches leases alone.
var forwardedSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// terminateName says what terminateGroup sends.
const terminateName = "SIGTERM to its process group"

// prepare puts CMD in the process group that leader (its watchdog) leads,
// so that it is stopped with everything it started (see groupAttr for the
// rest).
func prepare(cmd *exec.Cmd, leader *os.Process) { cmd.SysProcAttr = groupAttr(leader.Pid) }

func terminateGroup(p *os.Process) error { return syscall.Kill(-p.Pid, syscall.SIGTERM) }

func killGroup(p *os.Process) error { return syscall.Kill(-p.Pid, syscall.SIGKILL) }

func signalGroup(p *os.Process, sig os.Signal) error {
	if s, ok := sig.(syscall.Signal); ok {
		return syscall.Kill(-p.Pid, s)
	}
	return p.Signal(sig)
}

// stoppedBy names the signal that ended CMD, if one did.
func stoppedBy(state *os.ProcessState) (string, bool) {
	if state == nil {
		return "", false
	}
	ws, ok := state.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return "", false
	}
	switch sig := ws.Signal(); sig {
	case syscall.SIGKILL:
		return "SIGKILL", true
	case syscall.SIGTERM:
		return "SIGTERM", true
	default:
		return sig.String(), true
	}
}

// exitStatus is CMD's status as a shell says it: its exit code, or
// 128+N when signal N ended it.
func exitStatus(state *os.ProcessState) int {
	if state == nil {
		return exitFailed
	}
	if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return state.ExitCode()
}

// signalStatus is the status of leases ended by sig before CMD started:
// 128+N, as a shell says it.
func signalStatus(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return exitFailed
}
