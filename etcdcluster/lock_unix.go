//go:build unix

package etcdcluster

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// tryLock takes an exclusive lock on f without waiting; ok is false when
// another open file holds it. flock(2) locks belong to the open file, so
// a second open in the same process is refused too, and the kernel
// releases them when the process dies.
func tryLock(f *os.File) (ok bool, err error) {
	err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return false, nil
	}
	return err == nil, err
}
