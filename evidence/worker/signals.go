package worker

import (
	"context"
	"errors"
	"fmt"
	"runtime"
)

// ErrCannotStop is returned by Stop and Continue, and by CanStop, where
// this program cannot pause a process and know that it has paused:
// Windows has no SIGSTOP.
var ErrCannotStop = errors.New("pausing a worker needs SIGSTOP and a wait for the stop, which " + runtime.GOOS + " does not have")

// CanStop returns nil where Stop works (Linux, macOS), and ErrCannotStop
// elsewhere, so that what needs a paused worker can refuse, or skip,
// before it starts one.
func CanStop() error { return canStop }

// Stop pauses the worker with SIGSTOP, as a process is paused by a long
// garbage collection or a descheduled virtual machine, and waits, bounded
// by ctx, until the kernel reports it stopped. Sending the signal is not
// enough: a thread already running finishes its time slice first, and a
// request written to the worker in that window could still begin. After
// Stop returns the worker runs no instruction until Continue (or Kill,
// which ends a stopped worker as well).
func (w *Worker) Stop(ctx context.Context) error {
	if w.left.Load() {
		return w.errLeft()
	}
	if err := sendStop(w.cmd.Process); err != nil {
		return fmt.Errorf("stop worker %s: %w", w.name, err)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- waitStopped(w.cmd.Process.Pid) }()
	select {
	case <-ctx.Done():
		return fmt.Errorf("worker %s did not stop: %w", w.name, context.Cause(ctx))
	case err := <-stopped:
		if err != nil {
			return fmt.Errorf("stop worker %s: %w%s", w.name, err, w.stderr.saying())
		}
		return nil
	}
}

// Continue resumes a stopped worker with SIGCONT.
func (w *Worker) Continue() error {
	if w.left.Load() {
		return w.errLeft()
	}
	if err := sendContinue(w.cmd.Process); err != nil {
		return fmt.Errorf("continue worker %s: %w", w.name, err)
	}
	return nil
}
