package clock

import (
	"context"
	"errors"
	"testing"
)

// Each waiter wakes at the first Advance that reaches its tick, never
// earlier, and a waiter whose tick has passed does not wait at all.
func TestManualWakesEachWaiterAtItsTick(t *testing.T) {
	ctx := t.Context()
	m := NewManual(1)
	if err := m.Wait(ctx, 1); err != nil {
		t.Fatalf("Wait for the current tick: %v", err)
	}
	woke := map[int64]chan error{}
	for _, tick := range []int64{2, 3, 5} {
		done := make(chan error, 1)
		woke[tick] = done
		go func() { done <- m.Wait(ctx, tick) }()
	}
	if err := m.Waiters(ctx, 3); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		advance int64
		wakes   []int64
		waiting int
	}{
		{2, []int64{2}, 2},
		{2, nil, 2}, // the same tick again wakes no one more
		{4, []int64{3}, 1},
		{9, []int64{5}, 0},
	} {
		if err := m.Advance(step.advance); err != nil {
			t.Fatal(err)
		}
		// Advance wakes and forgets a waiter under the lock: once it
		// returns, whoever is still registered was not woken.
		m.mu.Lock()
		waiting := len(m.waiters)
		m.mu.Unlock()
		if waiting != step.waiting {
			t.Fatalf("after Advance(%d): %d waiting, want %d", step.advance, waiting, step.waiting)
		}
		for _, tick := range step.wakes {
			if err := <-woke[tick]; err != nil {
				t.Fatalf("waiter for tick %d: %v", tick, err)
			}
		}
	}
}

// Advance refuses to run backwards, in one line, and changes nothing.
func TestManualNeverRunsBackwards(t *testing.T) {
	m := NewManual(5)
	err := m.Advance(4)
	if err == nil || err.Error() != "clock: cannot move from tick 5 back to 4" {
		t.Fatalf("Advance(4) from 5: %v", err)
	}
	if m.Now() != 5 {
		t.Fatalf("now %d after a refused Advance, want 5", m.Now())
	}
}

// A Wait whose context ends returns the context's cause and leaves no
// waiter behind, on the manual clock and on the wall clock alike.
func TestWaitEndsWithItsContext(t *testing.T) {
	stop := errors.New("stopped by the test")
	for _, tc := range []struct {
		name  string
		clock Clock
		tick  int64
	}{
		{"manual", NewManual(0), 1},
		{"wall", Wall{}, Wall{}.Now() + 3_600_000}, // an hour from now
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(t.Context())
			cancel(stop)
			if err := tc.clock.Wait(ctx, tc.tick); !errors.Is(err, stop) {
				t.Fatalf("Wait after its context ended: %v, want %v", err, stop)
			}
			if m, ok := tc.clock.(*Manual); ok && len(m.waiters) != 0 {
				t.Fatalf("%d waiters left", len(m.waiters))
			}
		})
	}
}

// The wall clock's Wait for a tick already passed returns at once.
func TestWallWaitForThePast(t *testing.T) {
	w := Wall{}
	if err := w.Wait(t.Context(), w.Now()-1); err != nil {
		t.Fatal(err)
	}
}
