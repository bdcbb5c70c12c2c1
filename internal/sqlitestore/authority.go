package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"leases"
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
	var granted leases.Lease
	err := a.store.inTransaction(ctx, func(tx *sql.Tx) error {
		row, found, err := a.read(ctx, tx, resource)
		if err != nil {
			return err
		}
		var next rules.LeaseRow
		if next, granted, err = rules.Acquire(row, found, resource, holder, now, ttl); err != nil {
			return err
		}
		pauseInsideTransaction("acquire")
		if err := a.write(ctx, tx, resource, next); err != nil {
			return err
		}
		pauseInsideTransaction("acquire-written")
		return nil
	})
	a.store.changes.after(err)
	return rules.Granted(granted, err, resource, holder, now)
}

// Renew implements [leases.Authority.Renew].
func (a *Authority) Renew(ctx context.Context, held leases.Lease, now, ttl int64) (leases.Lease, error) {
	if err := rules.First(rules.CheckHeld(held, now), rules.CheckTTL(now, ttl)); err != nil {
		return leases.Lease{}, err
	}
	var renewed leases.Lease
	err := a.store.inTransaction(ctx, func(tx *sql.Tx) error {
		row, found, err := a.read(ctx, tx, held.Resource)
		if err != nil {
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
	err := a.store.inTransaction(ctx, func(tx *sql.Tx) error {
		row, found, err := a.read(ctx, tx, held.Resource)
		if err != nil {
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

// Holder implements [leases.Authority.Holder]. It reads in a transaction
// of its own and, unlike the changing methods, accepts any tick: a query
// for the past answers from the row as it is now.
func (a *Authority) Holder(ctx context.Context, resource string, now int64) (lease leases.Lease, live bool, err error) {
	if err := rules.CheckHolder(resource, now); err != nil {
		return leases.Lease{}, false, err
	}
	err = a.store.inTransaction(ctx, func(tx *sql.Tx) error {
		row, found, err := a.read(ctx, tx, resource)
		lease, live = rules.Holder(row, found, resource, now)
		return err
	})
	if err != nil {
		return leases.Lease{}, false, fmt.Errorf("holder of %q at tick %d: %w", resource, now, err)
	}
	return lease, live, nil
}

// Changed implements [leases.Watcher] for changes made through this
// store, in this process: SQLite cannot tell one process of another's
// commits, so a release by another process is seen at the lease's expiry
// tick at the latest.
func (a *Authority) Changed(ctx context.Context, resource string) (<-chan struct{}, error) {
	if err := rules.CheckName("resource", resource); err != nil {
		return nil, err
	}
	return a.store.changes.next(ctx), nil
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
