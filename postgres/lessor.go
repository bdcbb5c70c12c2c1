package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"leases"
	"leases/internal/outcome"
	"leases/internal/rules"
)

// lessor is a store's lease authority on the PostgreSQL server's
// clock (Store.Lessor): no caller says what time it is. Each decision reads the server's
// clock_timestamp(), in milliseconds since the Unix epoch, inside its
// transaction and after it has locked the resource's row, and takes the
// later of that and the row's last change as the decision's tick: a
// server clock stepped back cannot make a tick run backwards (the lease
// then lasts longer by the step, never shorter), so a decision is never
// refused with ErrTickBackwards. The ticks in the leases it returns are
// the server's milliseconds.
//
// Holders on machines whose clocks disagree by seconds still never hold
// a resource at once: the server alone decides when a lease expires, and
// a holder's session (package leases/session) ends on the holder's own
// clock, counting the time-to-live from when it sent the request that
// granted or renewed the lease, less its margin: only the rate of the
// holder's clock matters there, not its offset.
//
// Its leases' ticks are leases.ServerMillis.
type lessor struct {
	store *Store
}

var _ leases.Lessor = (*lessor)(nil)

// Acquire implements [leases.Lessor.Acquire]: a time-to-live below a
// millisecond is invalid input.
func (l *lessor) Acquire(ctx context.Context, resource, holder string, ttl time.Duration) (leases.Lease, error) {
	ticks, err := rules.CheckDuration(ttl)
	if err == nil {
		err = rules.First(rules.CheckName("resource", resource), rules.CheckName("holder", holder))
	}
	if err != nil {
		return leases.Lease{}, err
	}
	var granted leases.Lease
	var now int64
	var queued error
	err = l.store.decideIn(ctx, resource, lockGrant, func(tx *sql.Tx, row rules.LeaseRow, found bool, clock int64) (next rules.LeaseRow, write bool, err error) {
		queued, now = nil, rules.NotBefore(row, found, clock) // each try decides afresh
		if err := rules.CheckTTL(now, ticks); err != nil {
			return rules.LeaseRow{}, false, err
		}
		next, granted, err = rules.Acquire(row, found, resource, holder, now, ticks)
		queued, err = rules.InLine(ctx, &lineTx{s: l.store, tx: tx, holder: holder}, resource, holder, now, ticks, err)
		return next, queued == nil, err
	})
	if queued != nil && (err == nil || errors.Is(err, leases.ErrOutcomeUnknown)) {
		// Nothing was granted, whatever became of the place in line; a
		// place in line is no change to the lease.
		err = queued
	}
	if err != nil && now == 0 {
		// Failed before the server's clock was read: no tick to name.
		return leases.Lease{}, fmt.Errorf("acquire %q for %q: %w", resource, holder, err)
	}
	return rules.Stamp(leases.ServerMillis)(rules.Granted(granted, err, resource, holder, now))
}

// Renew implements [leases.Lessor.Renew], in the store's next batch of
// renewals (renewals.go).
func (l *lessor) Renew(ctx context.Context, held leases.Lease, ttl time.Duration) (leases.Lease, error) {
	ticks, err := rules.CheckDuration(ttl)
	if err == nil {
		err = rules.CheckHeld(held, 0)
	}
	if err != nil {
		return leases.Lease{}, err
	}
	renewed, err := l.store.renew(ctx, held, ticks)
	if err != nil {
		return leases.Lease{}, fmt.Errorf("renew %q for %q: %w", held.Resource, held.Holder, err)
	}
	return renewed, nil
}

// renewAlone decides one renewal in a transaction of its own.
func (s *Store) renewAlone(ctx context.Context, held leases.Lease, ticks int64) (leases.Lease, error) {
	var renewed leases.Lease
	err := s.decide(ctx, held.Resource, lockRenew, func(row rules.LeaseRow, found bool, clock int64) (next rules.LeaseRow, err error) {
		now := rules.NotBefore(row, found, clock)
		if err := rules.CheckTTL(now, ticks); err != nil {
			return rules.LeaseRow{}, err
		}
		next, renewed, err = rules.Renew(row, found, held, now, ticks)
		return next, err
	})
	renewed.Ticks = leases.ServerMillis
	return renewed, err
}

// Release implements [leases.Lessor.Release].
func (l *lessor) Release(ctx context.Context, held leases.Lease) error {
	if err := rules.CheckHeld(held, 0); err != nil {
		return err
	}
	err := l.store.decideIn(ctx, held.Resource, lockRenew, func(tx *sql.Tx, row rules.LeaseRow, found bool, clock int64) (rules.LeaseRow, bool, error) {
		next, err := rules.Release(row, found, held, rules.NotBefore(row, found, clock))
		if err == nil {
			err = l.store.notify(ctx, tx, held.Resource)
		}
		return next, true, err
	})
	if err != nil {
		return fmt.Errorf("release %q for %q: %w", held.Resource, held.Holder, err)
	}
	return nil
}

// Lease implements [leases.Lessor.Lease] with one statement, which
// takes no lock.
func (l *lessor) Lease(ctx context.Context, resource string) (leases.Lease, bool, error) {
	if err := rules.CheckName("resource", resource); err != nil {
		return leases.Lease{}, false, err
	}
	row, found, clock, err := l.store.peek(ctx, resource)
	if err != nil {
		return leases.Lease{}, false, fmt.Errorf("holder of %q: %w", resource, outcome.BeforeCommit(ctx, err))
	}
	lease, live := rules.Holder(row, found, resource, rules.NotBefore(row, found, clock))
	if live {
		lease.Ticks = leases.ServerMillis
	}
	return lease, live, nil
}

// Changed implements [leases.Lessor.Changed] with PostgreSQL's
// LISTEN/NOTIFY where the *sql.DB's driver is pgx's (its stdlib): every
// release of the Lessor NOTIFYs, in its transaction, and a waiter is
// woken when the notification arrives, after the commit. The
// store holds one connection of the *sql.DB for it while waiters listen,
// and a couple of seconds after the last. A grant or a renewal does not
// notify (a waiter learns of it when it looks again, at the expiry it was
// told).
// With another driver (lib/pq), database/sql can receive no
// notification, and a waiter reads the resource's row every
// Options.WatchInterval, with a statement that takes no lock: any
// process's grant, renewal or release closes the channel at the next
// read. Either way the channel decides nothing; the waiter then acquires
// in a transaction of its own.
func (l *lessor) Changed(ctx context.Context, resource string) (<-chan struct{}, error) {
	return l.store.lessorChanged(ctx, resource)
}
