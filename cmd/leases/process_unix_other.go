//go:build unix && !linux

package main

import "syscall"

// groupAttr: a process group of CMD's own. There is no parent-death
// signal here: if leases is killed (SIGKILL), CMD goes on without the
// lease, which expires.
func groupAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
