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
// one millisecond. Every process that shares an authority must then use
// it, and their clocks must agree to within the margin a session keeps
// (see package session); nothing here corrects for drift.
type Wall struct{}

// Now is the wall clock's current tick, in milliseconds since the Unix
// epoch.
func (Wall) Now() int64 { return time.Now().UnixMilli() }

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
			// The timer may fire a little early against Now's reading;
			// look again.
		}
	}
}
