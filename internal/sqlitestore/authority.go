package sqlitestore

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

const authoritySchema = `CREATE TABLE IF NOT EXISTS authority_leases (
	resource   TEXT PRIMARY KEY,
	epoch      INTEGER NOT NULL CHECK (epoch >= 1), -- last epoch granted; never reused
	holder     TEXT,                                -- NULL once released
	granted_at INTEGER NOT NULL,
	expires_at INTEGER NOT NULL,
	last_tick  INTEGER NOT NULL                     -- last tick that changed this row
) STRICT`

// Authority is the lease authority on one store's authority_leases table.
// Every method is one BEGIN IMMEDIATE transaction that reads the
// resource's row, asks package rules what to do, and writes the answer.
type Authority struct {
	store *Store
}

var _ leases.Authority = (*Authority)(nil)

// Acquire implements [leases.Authority.Acquire].
func (a *Authority) Acquire(ctx context.Context, resource, holder string, now, ttl int64) (leases.Lease, error) {
	if err := rules.CheckAcquire(resource, holder, now, ttl); err != nil {
		return leases.Lease{}, err
	}
	return a.acquire(ctx, resource, holder, rules.At(now), ttl, false)
}

// acquire is an acquire at the tick that tick decides on the row read in
// the transaction: the caller's, or the host's clock. inLine is the
// Lessor's: holder waits in the resource's line (see rules.InLine), and a
// refusal that put it there commits its place.
func (a *Authority) acquire(ctx context.Context, resource, holder string, tick rules.TickFunc, ttl int64, inLine bool) (leases.Lease, error) {
	var granted leases.Lease
	var now int64
	var queued error
	err := a.store.run(ctx, nil, func(tx *sql.Tx) (bool, error) {
		row, found, err := a.read(ctx, tx, resource)
		if err != nil {
			return false, err
		}
		if now, err = tick(row, found, ttl); err != nil {
			return false, err
		}
		var next rules.LeaseRow
		next, granted, err = rules.Acquire(row, found, resource, holder, now, ttl)
		if inLine {
			queued, err = rules.InLine(ctx, lineTx{a, tx, true}, resource, holder, now, ttl, err)
		}
		if queued != nil || err != nil {
			return err == nil, err
		}
		pauseInsideTransaction("acquire")
		if err := a.write(ctx, tx, resource, next); err != nil {
			return false, err
		}
		pauseInsideTransaction("acquire-written")
		return true, nil
	})
	if queued != nil && (err == nil || errors.Is(err, leases.ErrOutcomeUnknown)) {
		// Nothing was granted, whatever became of the place in line (a
		// failed commit leaves the store refusing everything after), and
		// a place in line is no change to the lease.
		err = queued
	} else {
		a.store.changes.after(err)
	}
	return rules.Granted(granted, err, resource, holder, now)
}

// Renew implements [leases.Authority.Renew].
func (a *Authority) Renew(ctx context.Context, held leases.Lease, now, ttl int64) (leases.Lease, error) {
	if err := rules.First(rules.CheckHeld(held, now), rules.CheckTTL(now, ttl)); err != nil {
		return leases.Lease{}, err
	}
	return a.renew(ctx, held, rules.At(now), ttl)
}

func (a *Authority) renew(ctx context.Context, held leases.Lease, tick rules.TickFunc, ttl int64) (leases.Lease, error) {
	var renewed leases.Lease
	var now int64
	err := a.store.inTransaction(ctx, func(tx *sql.Tx) error {
		row, found, err := a.read(ctx, tx, held.Resource)
		if err != nil {
			return err
		}
		if now, err = tick(row, found, ttl); err != nil {
			return err
		}
		if row, renewed, err = rules.Renew(row, found, held, now, ttl); err != nil {
			return err
		}
		return a.write(ctx, tx, held.Resource, row)
	})
	a.store.changes.after(err)
	if err != nil {
		return leases.Lease{}, fmt.Errorf("renew %q for %q at tick %d: %w", held.Resource, held.Holder, now, err)
	}
	return renewed, nil
}

// Release implements [leases.Authority.Release].
func (a *Authority) Release(ctx context.Context, held leases.Lease, now int64) error {
	if err := rules.CheckHeld(held, now); err != nil {
		return err
	}
	return a.release(ctx, held, rules.At(now))
}

func (a *Authority) release(ctx context.Context, held leases.Lease, tick rules.TickFunc) error {
	var now int64
	err := a.store.inTransaction(ctx, func(tx *sql.Tx) error {
		row, found, err := a.read(ctx, tx, held.Resource)
		if err != nil {
			return err
		}
		if now, err = tick(row, found, 0); err != nil {
			return err
		}
		if row, err = rules.Release(row, found, held, now); err != nil {
			return err
		}
		return a.write(ctx, tx, held.Resource, row)
	})
	a.store.changes.after(err)
	if err != nil {
		return fmt.Errorf("release %q for %q at tick %d: %w", held.Resource, held.Holder, now, err)
	}
	return nil
}

// Lease implements [leases.Authority.Lease]. It reads in a transaction
// of its own and, unlike the changing methods, accepts any tick: a query
// for the past answers from the row as it is now.
func (a *Authority) Lease(ctx context.Context, resource string, now int64) (lease leases.Lease, live bool, err error) {
	if err := rules.CheckHolder(resource, now); err != nil {
		return leases.Lease{}, false, err
	}
	return a.holder(ctx, resource, rules.At(now))
}

func (a *Authority) holder(ctx context.Context, resource string, tick rules.TickFunc) (lease leases.Lease, live bool, err error) {
	var now int64
	err = a.store.inTransaction(ctx, func(tx *sql.Tx) error {
		row, found, err := a.read(ctx, tx, resource)
		if err != nil {
			return err
		}
		if now, err = tick(row, found, 0); err != nil {
			return err
		}
		lease, live = rules.Holder(row, found, resource, now)
		return nil
	})
	if err != nil {
		return leases.Lease{}, false, fmt.Errorf("holder of %q at tick %d: %w", resource, now, err)
	}
	return lease, live, nil
}

// Changed implements [leases.Authority.Changed]. A change made through this store
// wakes the channel at once. Another process's commit cannot tell this one
// of itself (SQLite has no notifications between processes), so while a
// waiter listens the store looks every WatchInterval at PRAGMA
// data_version, which changes when another connection commits to the
// file, and then at the resource's row: a grant, renewal or release of it
// closes the channel, a commit that left the row as it was does not. The
// looks are reads that take no write lock, and decide nothing: the waiter
// then acquires in a transaction of its own.
func (a *Authority) Changed(ctx context.Context, resource string) (<-chan struct{}, error) {
	if err := rules.CheckName("resource", resource); err != nil {
		return nil, err
	}
	if err := a.store.usable(); err != nil {
		return nil, fmt.Errorf("watch %q: %w", resource, err)
	}
	inProcess := a.store.changes.next(ctx)
	version, err := a.store.dataVersion(ctx)
	if err != nil {
		return nil, fmt.Errorf("watch %q: %w", resource, outcome.BeforeCommit(ctx, err))
	}
	row, err := a.peek(ctx, resource)
	if err != nil {
		return nil, fmt.Errorf("watch %q: %w", resource, outcome.BeforeCommit(ctx, err))
	}
	changed := make(chan struct{})
	go func() {
		defer close(changed)
		ticker := time.NewTicker(a.store.watchInterval)
		defer ticker.Stop()
		for {
			select {
			case <-inProcess:
				return
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
			now, err := a.store.dataVersion(ctx)
			if err != nil {
				return // a waiter that wakes looks for itself
			}
			if now == version {
				continue
			}
			version = now
			if after, err := a.peek(ctx, resource); err != nil || after != row {
				return
			}
		}
	}()
	return changed, nil
}

// dataVersion is SQLite's PRAGMA data_version on the store's connection:
// it changes when another connection has committed to the file.
func (s *Store) dataVersion(ctx context.Context) (int64, error) {
	var v int64
	if err := s.db.QueryRowContext(ctx, "PRAGMA data_version").Scan(&v); err != nil {
		return 0, fmt.Errorf("data version: %w", err)
	}
	return v, nil
}

// peek reads the resource's row outside any transaction (a read that
// takes no write lock), for a watch that only looks.
func (a *Authority) peek(ctx context.Context, resource string) (rules.LeaseRow, error) {
	var row rules.LeaseRow
	var holder sql.NullString
	err := a.store.db.QueryRowContext(ctx, sqlReadLease, resource).Scan(&row.Epoch, &holder, &row.GrantedAt, &row.ExpiresAt, &row.LastTick)
	if errors.Is(err, sql.ErrNoRows) {
		return rules.LeaseRow{}, nil
	}
	row.Holder, row.Held = holder.String, holder.Valid
	return row, err
}

// read returns the resource's row; found is false only when there is no
// row, never when the read failed.
func (a *Authority) read(ctx context.Context, tx *sql.Tx, resource string) (row rules.LeaseRow, found bool, err error) {
	var holder sql.NullString
	err = a.store.sql.queryRow(ctx, tx, sqlReadLease, resource).Scan(&row.Epoch, &holder, &row.GrantedAt, &row.ExpiresAt, &row.LastTick)
	if errors.Is(err, sql.ErrNoRows) {
		return rules.LeaseRow{}, false, nil
	}
	if err != nil {
		return rules.LeaseRow{}, false, fmt.Errorf("read lease: %w", err)
	}
	row.Holder, row.Held = holder.String, holder.Valid
	return row, true, nil
}

// write stores the resource's whole row.
func (a *Authority) write(ctx context.Context, tx *sql.Tx, resource string, row rules.LeaseRow) error {
	holder := sql.NullString{String: row.Holder, Valid: row.Held}
	return a.store.sql.exec(ctx, tx, sqlPutLease, resource, row.Epoch, holder, row.GrantedAt, row.ExpiresAt, row.LastTick)
}
