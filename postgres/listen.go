package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/stdlib"

	"leases/internal/rules"
)

// listenIdle is how long a store's listening connection stays after its
// last waiter left, so that a waiter that tries again at once (every
// session.Wait does, after each wake-up) finds it listening rather than
// opening a connection on the way to its acquire.
const listenIdle = 2 * time.Second

// errNotPgx is a listener's answer on a *sql.DB whose driver is not
// pgx's: its waiters read the row at WatchInterval instead.
var errNotPgx = errors.New("the database/sql driver is not pgx's")

// listener is a store's LISTEN on the channel its Lessor's releases
// NOTIFY (the authority table's name, the payload the
// resource): one connection of the store's *sql.DB, held while waiters
// listen (and listenIdle after), which wakes every waiter of a resource
// when its lease changes, and every waiter when the connection fails (a
// waiter then looks for itself).
type listener struct {
	store *Store
	mu    sync.Mutex
	// waiters are the channels of each resource's waiters, closed by
	// the next change.
	waiters map[string][]chan struct{}
	run     *listening // the connection that listens now; nil when none
	notPgx  bool       // the driver cannot listen: never try again
}

// listening is one connection's LISTEN: ready is closed once it listens,
// or has failed (err, set before).
type listening struct {
	ready chan struct{}
	err   error
}

// changedByNotify is the Lessor's Changed: a channel closed by the next
// NOTIFY of resource, or nil when the store cannot listen (the caller
// polls instead).
func (l *listener) changedByNotify(ctx context.Context, resource string) <-chan struct{} {
	l.mu.Lock()
	if l.notPgx {
		l.mu.Unlock()
		return nil
	}
	started := l.run == nil
	if started {
		l.run = &listening{ready: make(chan struct{})}
		go l.listen(l.run)
	}
	run := l.run
	wake := make(chan struct{})
	if l.waiters == nil {
		l.waiters = map[string][]chan struct{}{}
	}
	l.waiters[resource] = append(l.waiters[resource], wake)
	l.mu.Unlock()
	select { // listen before the caller looks
	case <-run.ready:
	case <-ctx.Done():
	}
	if ctx.Err() == nil && run.err != nil {
		l.leave(resource, wake)
		return nil
	}
	if started {
		// The LISTEN took the pool's idle connection: open another now,
		// so that the acquire that follows does not open one inside its
		// lease's lifetime (a session counts that from its request).
		_ = l.store.db.PingContext(ctx)
	}
	changed := make(chan struct{})
	go func() {
		defer close(changed)
		select {
		case <-wake:
		case <-ctx.Done():
			l.leave(resource, wake)
		}
	}()
	return changed
}

// leave removes a waiter that stopped waiting.
func (l *listener) leave(resource string, wake chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	list := l.waiters[resource]
	for i, w := range list {
		if w == wake {
			l.waiters[resource] = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if len(l.waiters[resource]) == 0 {
		delete(l.waiters, resource)
	}
}

// wake wakes the waiters of resource, or every waiter when all is set.
func (l *listener) wake(resource string, all bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for r, list := range l.waiters {
		if all || r == resource {
			for _, w := range list {
				close(w)
			}
			delete(l.waiters, r)
		}
	}
}

// listen holds one connection that LISTENs, closes run.ready once it
// does (or has failed), and wakes waiters at each notification, until it
// has had no waiter for listenIdle or the connection fails; then it wakes
// every waiter.
func (l *listener) listen(run *listening) {
	err := l.hold(run)
	l.mu.Lock()
	if l.run == run {
		l.run = nil
	}
	l.notPgx = l.notPgx || errors.Is(err, errNotPgx)
	select {
	case <-run.ready:
	default:
		run.err = err
		if run.err == nil {
			run.err = errors.New("listen: ended before it listened")
		}
		close(run.ready)
	}
	l.mu.Unlock()
	l.wake("", true)
}

func (l *listener) hold(run *listening) error {
	ctx := context.Background()
	conn, err := l.store.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	defer conn.Close()
	return conn.Raw(func(driverConn any) error {
		c, ok := driverConn.(*stdlib.Conn)
		if !ok {
			return errNotPgx
		}
		pg := c.Conn()
		if _, err := pg.Exec(ctx, `LISTEN "`+l.store.names.authority+`"`); err != nil {
			return fmt.Errorf("listen: %w", err)
		}
		close(run.ready)
		for {
			wait, cancel := context.WithTimeout(ctx, listenIdle)
			n, err := pg.WaitForNotification(wait)
			cancel()
			switch {
			case n != nil:
				l.wake(n.Payload, false)
			case wait.Err() == nil:
				return fmt.Errorf("listen: %w", err)
			case l.idle(run):
				_, err := pg.Exec(ctx, `UNLISTEN "`+l.store.names.authority+`"`)
				return err
			}
		}
	})
}

// idle reports, and records, that run has no waiter: the next waiter
// starts another.
func (l *listener) idle(run *listening) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.waiters) > 0 || l.run != run {
		return false
	}
	l.run = nil
	return true
}

// lessorChanged is the Lessor's Changed: a LISTEN where the driver is
// pgx's, the row read at WatchInterval otherwise.
func (s *Store) lessorChanged(ctx context.Context, resource string) (<-chan struct{}, error) {
	if err := rules.CheckName("resource", resource); err != nil {
		return nil, err
	}
	if changed := s.listener.changedByNotify(ctx, resource); changed != nil {
		return changed, nil
	}
	return s.changed(ctx, resource)
}
