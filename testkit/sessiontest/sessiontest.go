// Package sessiontest is what the tests of the packages that a session's
// events feed (leases/health, leases/metrics) share: a real SQLite store of
// a test's own whose lessor decides on a manual clock that only the test
// moves, and a lessor whose renewals fail, or take time, on cue.
//
// A test kit: used by tests only, never by shipped code (the library, the
// evidence as cmd/run-experiment links it, the commands).
package sessiontest

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"leases"
	"leases/clock"
	"leases/sqlite"
	"leases/testkit/testctx"
)

// Bench is a test's setting: a SQLite file in the test's temporary
// directory, its lessor and its guard on Clock.
type Bench struct {
	t     testing.TB
	Ctx   context.Context // ends at the test's deadline
	Store *sqlite.Store
	Clock *clock.Manual
}

// New opens the bench's store, closed when the test ends, with its clock
// at tick 0.
func New(t testing.TB) *Bench {
	t.Helper()
	clk := clock.NewManual(0)
	ctx := testctx.Context(t)
	store, err := sqlite.Options{Clock: clk}.Open(ctx, filepath.Join(t.TempDir(), "leases.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	return &Bench{t: t, Ctx: ctx, Store: store, Clock: clk}
}

// Move moves the clock to tick and returns once what the move set off has
// run: ended is closed (true), or waiters goroutines wait on the clock
// again (false). A test passes a session's Done and the count of the
// goroutines it expects to wait (a live session has two).
func (b *Bench) Move(tick int64, ended <-chan struct{}, waiters int) bool {
	b.t.Helper()
	if err := b.Clock.Advance(tick); err != nil {
		b.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(b.Ctx)
	defer cancel()
	waiting := make(chan error, 1)
	go func() { waiting <- b.Clock.Waiters(ctx, waiters) }()
	select {
	case <-ended:
		return true
	case err := <-waiting:
		if err != nil {
			b.t.Fatalf("at tick %d, waiting for %d goroutines to wait on the clock: %v", tick, waiters, err)
		}
	}
	select {
	case <-ended:
		return true
	default:
		return false
	}
}

// Renewal is one renewal of a [Renewals] lessor's script.
type Renewal struct {
	// Err, when set, is the renewal's answer: nothing reaches the store.
	Err error
	// Delay is how many ticks the clock moves on before the renewal
	// reaches the store: a renewal that takes that long.
	Delay int64
}

// Renewals is a lessor whose renewals follow Script, one entry a call,
// and then reach the store as they are.
type Renewals struct {
	leases.Lessor
	Clock  *clock.Manual
	mu     sync.Mutex
	Script []Renewal
}

// Renew answers as the script's next entry says.
func (l *Renewals) Renew(ctx context.Context, held leases.Lease, ttl time.Duration) (leases.Lease, error) {
	l.mu.Lock()
	var next Renewal
	if len(l.Script) > 0 {
		next, l.Script = l.Script[0], l.Script[1:]
	}
	l.mu.Unlock()
	if next.Err != nil {
		return leases.Lease{}, next.Err
	}
	if next.Delay > 0 {
		if err := l.Clock.Advance(l.Clock.Now() + next.Delay); err != nil {
			return leases.Lease{}, err
		}
	}
	return l.Lessor.Renew(ctx, held, ttl)
}
