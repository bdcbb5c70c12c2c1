//go:build !linux

package childtest

import "syscall"

// diesWithParent is nothing where the kernel cannot kill a child with its
// parent: the child is killed at the test's end and bound only.
func diesWithParent() *syscall.SysProcAttr { return nil }
