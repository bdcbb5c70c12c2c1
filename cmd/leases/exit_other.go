//go:build !linux && !darwin

package main

import (
	"errors"
	"os"
)

// awaitExit cannot wait here without collecting the exit: the caller
// reaps CMD instead, and no longer signals its group once it has.
func awaitExit(*os.Process) error { return errors.ErrUnsupported }
