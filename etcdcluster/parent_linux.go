package etcdcluster

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// dieWithParent asks the kernel to kill this member when the thread that
// started it exits: a member stopped with SIGSTOP cannot see its input
// end, and must not outlive a parent that was killed. The member asks
// for it itself, so that it holds also under a wrapper (strace) that
// stands between it and the harness. If the parent died before this
// call, the member's input has ended already, and it exits on that.
func dieWithParent() error {
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		return fmt.Errorf("parent-death signal: %w", err)
	}
	return nil
}
