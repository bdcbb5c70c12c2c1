//go:build unix

package command

import "syscall"

// mayWrite asks the kernel whether this process may write path, without
// opening it.
func mayWrite(path string) error {
	const wOK = 2 // W_OK, the same on every Unix
	return syscall.Access(path, wOK)
}
