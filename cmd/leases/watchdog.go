package main

import (
	"fmt"
	"io"
	"sync"
	"time"

	"leases/clock"
	"leases/session"
)

// deadlines carries the session's deadline to CMD's watchdog: the
// session's events set it (each grant and renewal moves it later), and
// forward writes the latest to the watchdog whenever it moves. The hook
// never blocks: a watchdog that is not reading (stopped, or starved) must
// not hold up the session's renewals.
type deadlines struct {
	mu      sync.Mutex
	latest  int64         // the deadline on the host clock (hostNow), 0 before the grant
	changed chan struct{} // has a value when latest moved since forward last wrote
}

func newDeadlines() *deadlines {
	return &deadlines{changed: make(chan struct{}, 1)}
}

// hook wraps onEvent (which may be nil) so that each grant and renewal
// records the session's new deadline. The deadline is a tick of the
// session's clock (clock.Wall: leases run's stores drive none of their
// own); it is turned into the host's clock here, both clocks read
// together, so that the watchdog needs no clock of the supervisor's.
func (d *deadlines) hook(onEvent func(session.Event)) func(session.Event) {
	return func(ev session.Event) {
		if ev.Kind == session.Granted || ev.Kind == session.Renewed {
			left := time.Duration(ev.Deadline.UnixMilli()-clock.Wall{}.Now()) * time.Millisecond
			d.set(hostNow() + int64(left))
		}
		if onEvent != nil {
			onEvent(ev)
		}
	}
}

func (d *deadlines) set(at int64) {
	d.mu.Lock()
	d.latest = max(d.latest, at)
	d.mu.Unlock()
	select {
	case d.changed <- struct{}{}:
	default:
	}
}

func (d *deadlines) get() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.latest
}

// write writes the latest deadline to w, one decimal line: the moment,
// on the host clock in nanoseconds, at which CMD's group gets SIGKILL.
func (d *deadlines) write(w io.Writer) error {
	_, err := fmt.Fprintf(w, "%d\n", d.get())
	return err
}

// forward writes each new deadline to w until stop is closed, or until w
// fails (the watchdog is gone: CMD's group went with it).
func (d *deadlines) forward(w io.Writer, stop <-chan struct{}) {
	for {
		select {
		case <-d.changed:
			if d.write(w) != nil {
				return
			}
		case <-stop:
			return
		}
	}
}
