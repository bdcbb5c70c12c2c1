package sqlitestore

import (
	"context"
	"database/sql"
	"time"

	"leases"
	"leases/internal/rules"
)

// Lessor is the authority on the host's clock: each decision reads now()
// inside its transaction, once it holds the file's write lock, and never
// earlier than the row's last change. Every process on the machine reads
// the same clock, so no caller's clock decides anything.
type Lessor struct {
	auth *Authority
	tick rules.TickFunc
	now  func() int64
}

var _ leases.Lessor = (*Lessor)(nil)

// Lessor returns the store's authority on the clock now (milliseconds
// since the Unix epoch).
func (s *Store) Lessor(now func() int64) *Lessor {
	return &Lessor{auth: s.Authority(), tick: rules.Clock(now), now: now}
}

// Acquire implements [leases.Lessor.Acquire].
func (l *Lessor) Acquire(ctx context.Context, resource, holder string, ttl time.Duration) (leases.Lease, error) {
	ticks, err := rules.CheckDuration(ttl)
	if err == nil {
		err = rules.First(rules.CheckName("resource", resource), rules.CheckName("holder", holder))
	}
	if err != nil {
		return leases.Lease{}, err
	}
	if queued := l.auth.lookInLine(ctx, resource, holder, l.tick, ticks); queued != nil {
		return leases.Lease{}, queued
	}
	return rules.Stamp(leases.HostMillis)(l.auth.acquire(ctx, resource, holder, l.tick, ticks, true))
}

// Renew implements [leases.Lessor.Renew].
func (l *Lessor) Renew(ctx context.Context, held leases.Lease, ttl time.Duration) (leases.Lease, error) {
	ticks, err := rules.CheckDuration(ttl)
	if err == nil {
		err = rules.CheckHeld(held, 0)
	}
	if err != nil {
		return leases.Lease{}, err
	}
	return rules.Stamp(leases.HostMillis)(l.auth.renew(ctx, held, l.tick, ticks))
}

// Release implements [leases.Lessor.Release].
func (l *Lessor) Release(ctx context.Context, held leases.Lease) error {
	if err := rules.CheckHeld(held, 0); err != nil {
		return err
	}
	return l.auth.release(ctx, held, l.tick)
}

// Lease implements [leases.Lessor.Lease].
func (l *Lessor) Lease(ctx context.Context, resource string) (leases.Lease, bool, error) {
	if err := rules.CheckName("resource", resource); err != nil {
		return leases.Lease{}, false, err
	}
	lease, live, err := l.auth.holder(ctx, resource, l.tick)
	lease, err = rules.Stamp(leases.HostMillis)(lease, err)
	return lease, live, err
}

// Changed implements [leases.Lessor.Changed], as the store's authority
// does.
func (l *Lessor) Changed(ctx context.Context, resource string) (<-chan struct{}, error) {
	return l.auth.Changed(ctx, resource)
}

// UserTx runs fn in one BEGIN IMMEDIATE transaction on the store's
// connection and commits it if fn succeeds: the user's own transaction on
// the leases file, with the errors of every operation (see inTransaction).
func (s *Store) UserTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return s.inTransaction(ctx, fn)
}

// LiveIn reports whether held is the live lease, at the tick tick decides,
// on the rows tx sees: the lease check of a guarded write in the user's
// transaction. Inside the store's transaction it holds the file's write
// lock, so the answer stays true until the transaction ends.
func (a *Authority) LiveIn(ctx context.Context, tx *sql.Tx, held leases.Lease, tick rules.TickFunc) (bool, error) {
	row, found, err := a.read(ctx, tx, held.Resource)
	if err != nil {
		return false, err
	}
	now, err := tick(row, found, 0)
	if err != nil {
		return false, err
	}
	return rules.LiveFor(row, found, held, now)
}

// Tick is the lessor's clock as a rules.TickFunc.
func (l *Lessor) Tick() rules.TickFunc { return l.tick }

// DB is the store's one connection, for the explorer's user transactions
// on the store's own file (the guarded write in the user's transaction).
func (s *Store) DB() *sql.DB { return s.db }
