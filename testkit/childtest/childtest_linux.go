package childtest

import "syscall"

// diesWithParent makes the kernel kill the child when the thread that
// started it dies: a killed test leaves no child behind.
func diesWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
