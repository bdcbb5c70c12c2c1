//go:build linux || darwin

package stopwait

import (
	"errors"
	"fmt"
	"syscall"
	"unsafe"
)

// waitid's arguments and the si_code value it reports, the same on Linux
// and macOS; the syscall package names the options but not these.
const (
	idPID      = 1 // P_PID
	cldStopped = 5 // CLD_STOPPED
)

// ErrExited is Stopped's answer for a child that exited instead of
// stopping.
var ErrExited = errors.New("it exited instead of stopping")

// Stopped blocks until the child pid is stopped or has exited. With
// WNOWAIT nothing is collected: an exit stays for the child's reaper
// (exec.Cmd.Wait), and the kernel reports a stop only while the child is
// stopped, so the next stop after a SIGCONT waits for the new stop.
//
// On Linux the kernel reports the stop once every thread of the child has
// stopped. On macOS, kill(2) itself returns only once every thread of the
// child has left user code (the kernel suspends the task and waits for
// its threads inside the call), and waitid then confirms the stop, or
// that the child exited instead. The Go syscall package has no waitid on
// macOS; the system call is made by its number there, as on Linux.
func Stopped(pid int) error {
	// siginfo_t is 128 bytes on Linux and 104 on macOS; si_code is the
	// third int on both.
	var info [128]byte
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, idPID, uintptr(pid), uintptr(unsafe.Pointer(&info[0])),
			syscall.WSTOPPED|syscall.WEXITED|syscall.WNOWAIT, 0, 0)
		if errno == syscall.EINTR {
			continue // the Go runtime's signals interrupt the wait
		}
		if errno != 0 {
			return fmt.Errorf("waitid: %w", errno)
		}
		if code := *(*int32)(unsafe.Pointer(&info[8])); code != cldStopped {
			return ErrExited
		}
		return nil
	}
}
