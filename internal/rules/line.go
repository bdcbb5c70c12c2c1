package rules

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"leases"
)

// Waiter is one place in a resource's line: a holder whose acquire was
// refused, kept until tick Until (see Place).
type Waiter struct {
	Holder string
	Until  int64
}

// Ahead is the first waiter of line (in arrival order) still in line at
// tick now, when it is not holder: the one a free lease is kept for. ok is
// false when holder is first, or nobody is in line.
func Ahead(line []Waiter, holder string, now int64) (ahead Waiter, ok bool) {
	for _, w := range line {
		if w.Until <= now {
			continue
		}
		return w, w.Holder != holder
	}
	return Waiter{}, false
}

// Queued is the refusal of an acquire of resource, free at tick now but
// kept for ahead.
func Queued(resource string, ahead Waiter, now int64) *leases.HeldError {
	return &leases.HeldError{At: now, Queued: true,
		Live: leases.Lease{Resource: resource, Holder: ahead.Holder, ExpiresAt: ahead.Until}}
}

// Place is the tick until which a waiter refused with refusal keeps its
// place in line, having asked for ttl ticks: the end of the lease that
// refused it (or of the place ahead), by which a waiting session comes
// back, plus ttl, the time it takes to come back. A waiter that does not
// come back by then has gone away, and the line no longer waits for it.
// A holder refused for its own live lease takes no place (ok is false):
// a renewal, not a place in line, is how it keeps the lease.
func Place(holder string, refusal *leases.HeldError, ttl int64) (until int64, ok bool) {
	if !refusal.Queued && refusal.Live.Holder == holder {
		return 0, false
	}
	return refusal.Live.ExpiresAt + ttl, true
}

// Refresh reports whether a waiter whose place lasts until tick current
// (0: no place) must write its place anew to keep it until tick until: a
// place with at least half its grace, ttl, still to run stays as it is,
// so that a waiter refused again and again writes its place once in a
// while rather than at every refusal.
func Refresh(current, until, ttl int64) bool {
	return current < until-ttl/2
}

// LineTx is a resource's line inside one transaction of a store.
type LineTx interface {
	// Line removes the places whose time has passed at tick now (if the
	// transaction writes) and returns the rest, in arrival order.
	Line(ctx context.Context, resource string, now int64) ([]Waiter, error)
	// Place is the tick until which holder's place lasts; 0 for none.
	Place(ctx context.Context, resource, holder string) (int64, error)
	// Join writes holder's place, until tick until at least.
	Join(ctx context.Context, resource, holder string, until int64) error
	// Leave removes holder's place.
	Leave(ctx context.Context, resource, holder string) error
}

// InLine decides, in tx, where holder's acquire of resource at tick now
// for ttl ticks stands in the resource's line, given decided, Acquire's
// answer (nil: the lease is free). It returns queued, a refusal to answer
// once tx has committed holder's place in line, or nil when the lease
// goes to holder (first in line, or nobody waits), whose place it then
// removes; err is a refusal that takes no place (decided itself), or a
// failure.
func InLine(ctx context.Context, tx LineTx, resource, holder string, now, ttl int64, decided error) (queued, err error) {
	var held *leases.HeldError
	if decided != nil && !errors.As(decided, &held) {
		return nil, decided
	}
	if held == nil {
		line, err := tx.Line(ctx, resource, now)
		if err != nil {
			return nil, err
		}
		ahead, ok := Ahead(line, holder, now)
		if !ok {
			return nil, tx.Leave(ctx, resource, holder)
		}
		held = Queued(resource, ahead, now)
	}
	until, ok := Place(holder, held, ttl)
	if !ok {
		return nil, held
	}
	current, err := tx.Place(ctx, resource, holder)
	if err != nil || !Refresh(current, until, ttl) {
		return held, err
	}
	return held, tx.Join(ctx, resource, holder, until)
}

// ScanLine reads a line's places, holder and until, from rows, and
// closes rows.
func ScanLine(rows *sql.Rows) ([]Waiter, error) {
	defer rows.Close()
	var line []Waiter
	for rows.Next() {
		var w Waiter
		if err := rows.Scan(&w.Holder, &w.Until); err != nil {
			return nil, fmt.Errorf("read the line: %w", err)
		}
		line = append(line, w)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the line: %w", err)
	}
	return line, nil
}
