//go:build unix

package command_test

import (
	"os/exec"
	"syscall"
)

// inOwnProcessGroup starts cmd in a process group of its own, and has its
// context's end kill the whole group: the command and strace in front of
// it. (Its workers lead groups of their own, and end with the command:
// see evidence/worker.)
func inOwnProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return killProcessGroup(cmd) }
}

// killProcessGroup sends SIGKILL to the process group cmd leads.
func killProcessGroup(cmd *exec.Cmd) error {
	return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}
