//go:build linux || darwin

package main

import (
	"fmt"
	"os"
	"syscall"
	"unsafe"
)

// idPID is waitid's P_PID, the same on Linux and macOS; the syscall
// package names WEXITED and WNOWAIT but not it.
const idPID = 1

// awaitExit blocks until the child p has exited, without collecting its
// exit (WNOWAIT): p stays a zombie, and its process group's id cannot be
// reused, until exec.Cmd.Wait reaps it. The syscall package has no waitid
// on macOS; the system call is made by its number, as on Linux.
func awaitExit(p *os.Process) error {
	var info [128]byte // siginfo_t: 128 bytes on Linux, 104 on macOS
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, idPID, uintptr(p.Pid),
			uintptr(unsafe.Pointer(&info[0])), syscall.WEXITED|syscall.WNOWAIT, 0, 0)
		switch errno {
		case 0:
			return nil
		case syscall.EINTR:
			continue // the Go runtime's signals interrupt the wait
		}
		return fmt.Errorf("waitid: %w", errno)
	}
}
