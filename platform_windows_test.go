package leases_test

import (
	"errors"
	"os/exec"
)

// inOwnProcessGroup has cmd's context end cmd alone: Windows has no
// process group to kill at once (a worker still ends when its input does).
func inOwnProcessGroup(*exec.Cmd) {}

// killProcessGroup kills the process cmd started.
func killProcessGroup(cmd *exec.Cmd) error { return cmd.Process.Kill() }

// mkfifo fails: Windows has no FIFO in the file system.
func mkfifo(string) error { return errors.ErrUnsupported }
