//go:build unix && !linux

package main

import "syscall"

// groupAttr: CMD in the process group pgid (its watchdog's). There is no
// parent-death signal here: if leases is killed (SIGKILL), the watchdog
// kills CMD's group when it reads the end of its input.
func groupAttr(pgid int) *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true, Pgid: pgid} }
