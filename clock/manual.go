package clock

import (
	"context"
	"fmt"
	"sync"
)

// Manual is a clock that moves only when it is told to. Waiters wake when
// Advance passes their tick, in the goroutine of their own Wait; nothing
// sleeps. The zero value is a clock at tick 0.
type Manual struct {
	mu      sync.Mutex
	now     int64
	waiters map[chan struct{}]int64
	// joined is closed, and forgotten, whenever a waiter joins.
	joined chan struct{}
}

// NewManual returns a manual clock at tick start.
func NewManual(start int64) *Manual { return &Manual{now: start} }

// Now is the current tick.
func (m *Manual) Now() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now
}

// Wait returns once the clock has reached tick, or with ctx's error when
// ctx ends first.
func (m *Manual) Wait(ctx context.Context, tick int64) error {
	m.mu.Lock()
	if m.now >= tick {
		m.mu.Unlock()
		return nil
	}
	woken := make(chan struct{})
	if m.waiters == nil {
		m.waiters = map[chan struct{}]int64{}
	}
	m.waiters[woken] = tick
	if m.joined != nil {
		close(m.joined)
		m.joined = nil
	}
	m.mu.Unlock()
	select {
	case <-woken:
		return nil
	case <-ctx.Done():
		m.mu.Lock()
		delete(m.waiters, woken)
		m.mu.Unlock()
		return context.Cause(ctx)
	}
}

// Advance moves the clock to tick and wakes every waiter whose tick it
// has reached. A tick earlier than Now is refused: the clock never runs
// backwards.
func (m *Manual) Advance(tick int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if tick < m.now {
		return fmt.Errorf("clock: cannot move from tick %d back to %d", m.now, tick)
	}
	m.now = tick
	for woken, at := range m.waiters {
		if at <= tick {
			close(woken)
			delete(m.waiters, woken)
		}
	}
	return nil
}

// Waiters returns once at least n Waits are blocked on this clock, or
// with ctx's error. A test calls it to know, without sleeping, that the
// goroutines it started have reached the point where they wait for the
// clock, before it advances the clock.
func (m *Manual) Waiters(ctx context.Context, n int) error {
	for {
		m.mu.Lock()
		if len(m.waiters) >= n {
			m.mu.Unlock()
			return nil
		}
		if m.joined == nil {
			m.joined = make(chan struct{})
		}
		joined := m.joined
		m.mu.Unlock()
		select {
		case <-joined:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}
