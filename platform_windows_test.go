package leases_test

import (
	"errors"
	"os/exec"
	"syscall"
)

// processGone reports whether no process with pid exists any more: none
// can be opened, or the one opened has exited (an exited process lives on
// while a handle to it is open).
func processGone(pid int) bool {
	h, err := syscall.OpenProcess(syscall.SYNCHRONIZE, false, uint32(pid))
	if err != nil {
		return true
	}
	defer syscall.CloseHandle(h)
	event, err := syscall.WaitForSingleObject(h, 0)
	return err == nil && event == syscall.WAIT_OBJECT_0
}

// inOwnProcessGroup has cmd's context end cmd alone: Windows has no
// process group to kill at once (a worker still ends when its input does).
func inOwnProcessGroup(*exec.Cmd) {}

// killProcessGroup kills the process cmd started.
func killProcessGroup(cmd *exec.Cmd) error { return cmd.Process.Kill() }

// mkfifo fails: Windows has no FIFO in the file system.
func mkfifo(string) error { return errors.ErrUnsupported }
