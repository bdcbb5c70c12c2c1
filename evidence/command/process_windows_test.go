package command_test

import "os/exec"

// inOwnProcessGroup has cmd's context end cmd alone: Windows has no
// process group to kill at once (a worker still ends when its input does).
func inOwnProcessGroup(*exec.Cmd) {}

// killProcessGroup kills the process cmd started.
func killProcessGroup(cmd *exec.Cmd) error { return cmd.Process.Kill() }
