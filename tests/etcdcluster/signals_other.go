//go:build !unix

package etcdcluster

import (
	"errors"
	"fmt"
	"runtime"
)

// stop and resume are not supported: there is no SIGSTOP here. Callers
// test errors.Is(err, errors.ErrUnsupported) and skip.
func stop(int) error {
	return fmt.Errorf("etcdcluster: pausing a process on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

func resume(int) error {
	return fmt.Errorf("etcdcluster: continuing a process on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}
