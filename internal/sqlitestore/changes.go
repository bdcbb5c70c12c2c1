package sqlitestore

import (
	"context"
	"sync"
)

// changes is a broadcast to the goroutines of this process that wait for
// any lease of the store to change: each waiter gets a channel that the
// next change closes, and checks again what it waits for.
type changes struct {
	mu   sync.Mutex
	wake chan struct{}
}

// next returns a channel closed by the next change, or when ctx ends.
func (c *changes) next(ctx context.Context) <-chan struct{} {
	c.mu.Lock()
	if c.wake == nil {
		c.wake = make(chan struct{})
	}
	wake := c.wake
	c.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-wake:
		case <-ctx.Done():
		}
	}()
	return done
}

// after wakes every waiter when err is nil, that is after an operation
// committed a change (a refusal or a failure changed nothing).
func (c *changes) after(err error) {
	if err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.wake != nil {
		close(c.wake)
		c.wake = nil
	}
}
