package command

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// ErrInterrupted is the cause of a run cancelled by a signal; the command
// reports it instead of whatever the interrupted operation returned.
var ErrInterrupted = errors.New("interrupted")

// signalNames spell the signals the command handles as a user types them.
var signalNames = map[os.Signal]string{syscall.SIGINT: "SIGINT", syscall.SIGTERM: "SIGTERM"}

// cancelOnSignal returns a copy of parent that is cancelled, with a cause
// naming the signal, when one of signals arrives. Unlike
// signal.NotifyContext, whose cause says "interrupt signal received", the
// cause matches ErrInterrupted and names the signal as kill(1) does.
// stop unregisters the signals and releases the context.
func cancelOnSignal(parent context.Context, signals ...os.Signal) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
	arrived := make(chan os.Signal, 1)
	signal.Notify(arrived, signals...)
	go func() {
		select {
		case sig := <-arrived:
			name, ok := signalNames[sig]
			if !ok {
				name = sig.String()
			}
			cancel(fmt.Errorf("%w by %s", ErrInterrupted, name))
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(arrived)
		cancel(nil)
	}
}
