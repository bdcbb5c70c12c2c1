//go:build !unix

package main

import (
	"os"
	"os/exec"
)

// forwardedSignals: an interrupt (Ctrl-C) is all a process gets here.
var forwardedSignals = []os.Signal{os.Interrupt}

// terminateName says what terminateGroup does: there is no SIGTERM to
// send, and no process group.
const terminateName = "killed"

func prepare(*exec.Cmd, *os.Process) {}

// stoppedBy: no signal ends a process here.
func stoppedBy(*os.ProcessState) (string, bool) { return "", false }

func terminateGroup(p *os.Process) error { return p.Kill() }

func killGroup(p *os.Process) error { return p.Kill() }

// signalGroup kills CMD: a signal cannot be sent to another process here.
func signalGroup(p *os.Process, _ os.Signal) error { return p.Kill() }

// exitStatus is CMD's exit code.
func exitStatus(state *os.ProcessState) int {
	if state == nil {
		return exitFailed
	}
	return state.ExitCode()
}

// signalStatus is the status of leases interrupted before CMD started:
// 130, as for SIGINT elsewhere.
func signalStatus(os.Signal) int { return 130 }
