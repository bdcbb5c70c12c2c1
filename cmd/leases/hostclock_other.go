//go:build !linux

package main

import "time"

// hostNow is the host clock in nanoseconds, on which the supervisor tells
// the watchdog CMD's deadline: the system's wall clock, the one clock
// that every process of the host reads alike without a system call of
// Linux's. A step of the system's time between the supervisor's reading
// and the watchdog's moves the kill by the step; the watchdog's timer
// itself runs on Go's monotonic clock once set.
func hostNow() int64 { return time.Now().UnixNano() }
