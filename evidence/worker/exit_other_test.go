//go:build !linux && !darwin

package worker_test

import (
	"errors"
	"time"
)

// waitForExit fails: waiting for a process that is not a child takes a
// pidfd (Linux) or a kqueue (macOS) here. Its only test needs SIGSTOP
// first, and skips where there is none.
func waitForExit(int, time.Time) error {
	return errors.New("waiting for another process's exit needs Linux or macOS")
}
