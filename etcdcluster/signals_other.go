//go:build !unix

package etcdcluster

import (
	"errors"
	"fmt"
	"os"
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

// killedByHarness reports whether a process ended as the harness ends
// one; without signals, a process the harness asked to end counts as
// ended by it.
func killedByHarness(*os.ProcessState) bool { return true }
