//go:build unix

package experimenttest

import (
	"errors"
	"syscall"
)

// ProcessGone reports whether no process with pid exists any more.
func ProcessGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
