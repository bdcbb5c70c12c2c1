// Package testctx gives a test a context that ends shortly before the
// test's own deadline (go test -timeout), so that a hang fails with the
// test's own message rather than the test binary's panic, and a slow but
// working run is never cut short by a constant of its own.
package testctx

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// Context returns a context that ends when t ends, or a little before
// t's deadline if it has one: a twentieth of the time left, at least a
// second and at most a minute, is left for the test to report and clean
// up. Without a deadline (go test -timeout 0) only the end of t ends it.
func Context(t testing.TB) context.Context {
	t.Helper()
	ctx := t.Context()
	deadline, ok := deadlineOf(t)
	if !ok {
		return ctx
	}
	grace := min(max(time.Until(deadline)/20, time.Second), time.Minute)
	ctx, cancel := context.WithDeadlineCause(ctx, deadline.Add(-grace),
		fmt.Errorf("%w: the test's own deadline (go test -timeout) is near", context.DeadlineExceeded))
	t.Cleanup(cancel)
	return ctx
}

func deadlineOf(t testing.TB) (time.Time, bool) {
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		return d.Deadline()
	}
	return time.Time{}, false
}
