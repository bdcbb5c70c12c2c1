package postgres

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"leases"
	"leases/internal/outcome"
	"leases/internal/rules"
)

// Authority is the lease authority of a store with explicit ticks: the
// caller says what time it is, as leases.Authority defines. Every
// decision is one transaction that locks the resource's row, asks package
// leases' rules what to do with it, and writes the answer. It is also a
// the contract's model. For a service, use the server's clock
// ([Store.Lessor]).
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
	err := a.store.decide(ctx, resource, lockGrant, func(row rules.LeaseRow, found bool, _ int64) (next rules.LeaseRow, err error) {
		next, granted, err = rules.Acquire(row, found, resource, holder, now, ttl)
		return next, err
	})
	return rules.Granted(granted, err, resource, holder, now)
}

// Renew implements [leases.Authority.Renew].
func (a *Authority) Renew(ctx context.Context, held leases.Lease, now, ttl int64) (leases.Lease, error) {
	if err := rules.First(rules.CheckHeld(held, now), rules.CheckTTL(now, ttl)); err != nil {
		return leases.Lease{}, err
	}
	var renewed leases.Lease
	err := a.store.decide(ctx, held.Resource, lockRenew, func(row rules.LeaseRow, found bool, _ int64) (next rules.LeaseRow, err error) {
		next, renewed, err = rules.Renew(row, found, held, now, ttl)
		return next, err
	})
	if err != nil {
		return leases.Lease{}, fmt.Errorf("renew %q for %q at tick %d: %w", held.Resource, held.Holder, now, err)
	}
	return renewed, nil
}

// Release implements [leases.Authority.Release]. The row stays, holding
// the epoch, so that the next acquire gets a higher one.
func (a *Authority) Release(ctx context.Context, held leases.Lease, now int64) error {
	if err := rules.CheckHeld(held, now); err != nil {
		return err
	}
	err := a.store.decide(ctx, held.Resource, lockRenew, func(row rules.LeaseRow, found bool, _ int64) (rules.LeaseRow, error) {
		return rules.Release(row, found, held, now)
	})
	if err != nil {
		return fmt.Errorf("release %q for %q at tick %d: %w", held.Resource, held.Holder, now, err)
	}
	return nil
}

// Lease implements [leases.Authority.Lease] with one statement, which
// takes no lock. It accepts any tick: a query for the past answers from
// the row as it is now.
func (a *Authority) Lease(ctx context.Context, resource string, now int64) (leases.Lease, bool, error) {
	if err := rules.CheckHolder(resource, now); err != nil {
		return leases.Lease{}, false, err
	}
	row, found, _, err := a.store.peek(ctx, resource)
	if err != nil {
		return leases.Lease{}, false, fmt.Errorf("holder of %q at tick %d: %w", resource, now, outcome.BeforeCommit(ctx, err))
	}
	lease, live := rules.Holder(row, found, resource, now)
	return lease, live, nil
}

// Changed implements [leases.Authority.Changed]: see [Store.Changed].
func (a *Authority) Changed(ctx context.Context, resource string) (<-chan struct{}, error) {
	return a.store.changed(ctx, resource)
}

// decide makes one decision on resource's lease row, in one transaction:
// it locks the row in mode (see the lock modes), reads the server's clock
// after the lock (in the same statement), lets decide choose the row to
// write or refuse, and writes that row. decide may run again, in a new
// transaction, when the first try committed nothing (see inTx).
func (s *Store) decide(ctx context.Context, resource, mode string,
	decide func(row rules.LeaseRow, found bool, clock int64) (rules.LeaseRow, error)) error {
	return s.decideIn(ctx, resource, mode, func(_ *sql.Tx, row rules.LeaseRow, found bool, clock int64) (rules.LeaseRow, bool, error) {
		next, err := decide(row, found, clock)
		return next, true, err
	})
}

// decideIn is decide with the transaction at hand: decide may write more
// in tx, and, saying write false, commit that without writing the lease
// row (the Lessor's place in line, see line.go).
func (s *Store) decideIn(ctx context.Context, resource, mode string,
	decide func(tx *sql.Tx, row rules.LeaseRow, found bool, clock int64) (next rules.LeaseRow, write bool, err error)) error {
	return s.inTx(ctx, func(tx *sql.Tx) (bool, error) {
		row, found, clock, err := s.lockLease(ctx, tx, resource, mode)
		if err == nil && !found && mode == lockRenew {
			row, found, clock, err = s.awaitFirstRow(ctx, tx, resource)
		}
		if err != nil {
			return false, err
		}
		next, write, err := decide(tx, row, found, clock)
		if err != nil || !write {
			return err == nil, err
		}
		step(ctx, "write")
		return true, s.putLease(ctx, tx, resource, next, found)
	})
}

// awaitFirstRow waits, in tx, for a first acquire of resource that is
// still committing, and reads the row again: a renewal or a release that
// finds no row must not be refused while the grant it is about (one whose
// outcome was unknown to its caller, who now releases what it may hold)
// can still commit after it, or the caller would be told that nothing is
// held while the lease comes to life. An uncommitted first row has no row
// lock to wait for, but inserting the same key waits for it: a probe
// insert, in a savepoint rolled back at once, does (and, under REPEATABLE
// READ and SERIALIZABLE, fails with a serialization failure when that row
// committed after the snapshot, which inTx tries again).
func (s *Store) awaitFirstRow(ctx context.Context, tx *sql.Tx, resource string) (rules.LeaseRow, bool, int64, error) {
	_, err := tx.ExecContext(ctx, `SAVEPOINT first_row`)
	if err == nil {
		_, err = tx.ExecContext(ctx, s.sql.probeFirstRow, resource)
	}
	if err == nil {
		_, err = tx.ExecContext(ctx, `ROLLBACK TO SAVEPOINT first_row`)
	}
	if err != nil {
		return rules.LeaseRow{}, false, 0, fmt.Errorf("wait for a first acquire still committing: %w", err)
	}
	return s.lockLease(ctx, tx, resource, lockRenew)
}

// lockLease locks resource's row in tx in mode and reads it, with the
// server's clock read after the lock; found is false only when there is
// no row, never when the read failed.
func (s *Store) lockLease(ctx context.Context, tx *sql.Tx, resource, mode string) (rules.LeaseRow, bool, int64, error) {
	step(ctx, "lock")
	row, found, clock, err := scanLease(tx.QueryRowContext(ctx, s.sql.lock[mode], resource))
	if err != nil {
		return rules.LeaseRow{}, false, 0, fmt.Errorf("read the lease: %w", err)
	}
	return row, found, clock, nil
}

// peek reads resource's row, and the server's clock, in one statement of
// its own that takes no lock.
func (s *Store) peek(ctx context.Context, resource string) (rules.LeaseRow, bool, int64, error) {
	row, found, clock, err := scanLease(s.db.QueryRowContext(ctx, s.sql.peek, resource))
	if err != nil {
		return rules.LeaseRow{}, false, 0, fmt.Errorf("read the lease: %w", err)
	}
	return row, found, clock, nil
}

// scanLease scans one of the lease reads: the row's columns, NULL when
// there is no row, and the server's clock.
func scanLease(r *sql.Row) (row rules.LeaseRow, found bool, clock int64, err error) {
	var epoch, grantedAt, expiresAt, lastTick sql.NullInt64
	var holder sql.NullString
	if err := r.Scan(&epoch, &holder, &grantedAt, &expiresAt, &lastTick, &clock); err != nil {
		return rules.LeaseRow{}, false, 0, err
	}
	if !epoch.Valid {
		return rules.LeaseRow{}, false, clock, nil
	}
	row = rules.LeaseRow{Epoch: epoch.Int64, Holder: holder.String, Held: holder.Valid,
		GrantedAt: grantedAt.Int64, ExpiresAt: expiresAt.Int64, LastTick: lastTick.Int64}
	return row, true, clock, nil
}

// putLease stores row as resource's row: an update of the row that tx
// has locked, or, when there was none, the resource's first row.
func (s *Store) putLease(ctx context.Context, tx *sql.Tx, resource string, row rules.LeaseRow, found bool) error {
	holder := sql.NullString{String: row.Holder, Valid: row.Held}
	statement := s.sql.insertLease
	if found {
		statement = s.sql.updateLease
	}
	result, err := tx.ExecContext(ctx, statement, resource, row.Epoch, holder, row.GrantedAt, row.ExpiresAt, row.LastTick)
	if err != nil {
		return fmt.Errorf("write the lease: %w", err)
	}
	n, err := result.RowsAffected()
	switch {
	case err != nil:
		return fmt.Errorf("write the lease: rows affected: %w", err)
	case n == 0 && !found:
		return errLostInsert
	case n != 1:
		return fmt.Errorf("write the lease: %d rows written, not 1: the row was deleted, or the table is not this schema", n)
	}
	return nil
}

// changed is Changed of both faces of the store: it reads resource's
// row now and then every WatchInterval, each time in a statement of its
// own that takes no lock, and closes the channel when the row differs
// from the first read (a grant, a renewal, a release, by any process),
// when a read fails (the waiter then looks for itself), or when ctx ends.
func (s *Store) changed(ctx context.Context, resource string) (<-chan struct{}, error) {
	if err := rules.CheckName("resource", resource); err != nil {
		return nil, err
	}
	first, found, _, err := s.peek(ctx, resource)
	if err != nil {
		return nil, fmt.Errorf("watch %q: %w", resource, outcome.BeforeCommit(ctx, err))
	}
	changed := make(chan struct{})
	go func() {
		defer close(changed)
		ticker := time.NewTicker(s.watchInterval)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
			row, foundNow, _, err := s.peek(ctx, resource)
			if err != nil || foundNow != found || row != first {
				return
			}
		}
	}()
	return changed, nil
}
