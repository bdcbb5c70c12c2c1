//go:build !linux && !darwin

package worker

import "os"

// Where there is no SIGSTOP (Windows), or no waitid to learn that a
// process has stopped (the other systems), nothing is paused: every part
// of Stop fails with ErrCannotStop, and CanStop says so beforehand.
var canStop error = ErrCannotStop

func sendStop(*os.Process) error     { return ErrCannotStop }
func sendContinue(*os.Process) error { return ErrCannotStop }
func waitStopped(int) error          { return ErrCannotStop }
