//go:build unix

package sqlite_test

import (
	"syscall"
)

// mkfifo makes a FIFO at path.
func mkfifo(path string) error { return syscall.Mkfifo(path, 0o600) }
