// Package clock is where a lease holder reads its ticks: the wall clock in
// a service, or a manual clock that a test or an experiment advances by
// hand, so that everything that waits on it is deterministic.
//
// The authority's methods take the tick as an argument and never read a
// clock; only the pieces that must act on their own (a holder's session,
// a waiting acquire) read one.
package clock

import (
	"context"
	"time"
)

// Clock is a source of ticks that never run backwards.
type Clock interface {
	// Now is the current tick.
	Now() int64
	// Wait returns once Now has reached tick (at once if it has), or
	// with ctx's error when ctx ends first.
	Wait(ctx context.Context, tick int64) error
}

// Wall is the wall clock in milliseconds since the Unix epoch: one tick is
// one millisecond. It is read once, when the process starts, and then
// advanced by the monotonic clock, so that it never jumps, forwards or
// backwards, when the system's clock is stepped: a session counting its
// deadline on it is not fooled by a step. Processes that drive an
// authority's ticks with it (see [Lessor]) must agree to within a
// session's margin; nothing here corrects for drift between machines.
type Wall struct{}

// started is the wall clock at start-up, with Go's monotonic reading.
var started = time.Now()

// Now is the wall clock's current tick, in milliseconds since the Unix
// epoch: the time at start-up plus the monotonic time elapsed since.
func (Wall) Now() int64 { return started.UnixMilli() + time.Since(started).Milliseconds() }

// Wait returns once the wall clock has reached tick, or when ctx ends.
func (w Wall) Wait(ctx context.Context, tick int64) error {
	for {
		now := w.Now()
		if now >= tick {
			return nil
		}
		timer := time.NewTimer(time.Duration(tick-now) * time.Millisecond)
		select {
		case <-ctx.Done():
			timer.Stop()
			return context.Cause(ctx)
		case <-timer.C:
			// Now truncates to the millisecond: look again.
		}
	}
}
