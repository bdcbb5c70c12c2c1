//go:build !linux && !darwin

package stopwait

import "errors"

// Stopped is unsupported where there is no waitid to learn that a
// process has stopped (Windows has no SIGSTOP either).
func Stopped(int) error { return errors.ErrUnsupported }
