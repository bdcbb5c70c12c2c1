// Package testctx bounds what a test waits for by the test's own deadline
// (go test -timeout), never by a constant of its own: a fixed bound fires
// on a slow but working run (a loaded machine, -race), while the
// deadline is what the person running the tests chose.
//
// A test kit: used by tests only, never by shipped code (the library, the
// evidence as cmd/run-experiment links it, the commands).
package testctx

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"
)

// Deadline is when a test stops waiting for anything that only a hang
// delays: the test's deadline less a margin (a tenth of the time left, at
// most 10 s), so that the test fails with its own message, its processes
// ended, before go test's timeout ends the whole binary. ok is false when
// the test has no deadline (-timeout 0): then nothing is bounded.
func Deadline(t testing.TB) (deadline time.Time, ok bool) {
	t.Helper()
	d, ok := t.(interface{ Deadline() (time.Time, bool) })
	if !ok {
		return time.Time{}, false
	}
	if deadline, ok = d.Deadline(); !ok {
		return time.Time{}, false
	}
	margin := min(10*time.Second, time.Until(deadline)/10)
	return deadline.Add(-margin), true
}

// Bound is how long from now a test may wait (see Deadline); the longest
// duration there is when the test has no deadline.
func Bound(t testing.TB) time.Duration {
	t.Helper()
	deadline, ok := Deadline(t)
	if !ok {
		return math.MaxInt64
	}
	return time.Until(deadline)
}

// Context is done when the test ends or reaches Deadline, with a cause
// that says which bound fired.
func Context(t testing.TB) context.Context {
	t.Helper()
	deadline, ok := Deadline(t)
	if !ok {
		return t.Context()
	}
	ctx, cancel := context.WithDeadlineCause(t.Context(), deadline,
		errors.New("the test's deadline (go test -timeout, less a margin) passed"))
	t.Cleanup(cancel)
	return ctx
}
