package main

import (
	"syscall"
	"unsafe"
)

// clockMonotonic is CLOCK_MONOTONIC, which the syscall package does not
// name.
const clockMonotonic = 1

// hostNow is the host clock in nanoseconds, on which the supervisor tells
// the watchdog CMD's deadline: CLOCK_MONOTONIC, one clock for every
// process of the host, never stepped (a change of the system's time moves
// no deadline), and the clock Go's timers run on here, so that the
// watchdog's timer and its reading agree. (CLOCK_BOOTTIME would count a
// suspended host, but Go's timers do not: a timer set on it would still
// wake late after a suspend; a paused host is the residual window, which
// the fence answers.)
func hostNow() int64 {
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockMonotonic, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		panic("leases: clock_gettime(CLOCK_MONOTONIC): " + errno.Error()) // it exists on every Linux Go runs on
	}
	return ts.Nano()
}
