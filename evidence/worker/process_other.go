//go:build !unix

package worker

import "syscall"

// endsWithController adds nothing where there is no SIGSTOP (Windows): a
// worker cannot be stopped there (see CanStop), and a running one exits
// once its input ends, which happens when its controller dies.
func endsWithController(bool) *syscall.SysProcAttr { return nil }
