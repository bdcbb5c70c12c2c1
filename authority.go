package leases

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

const authoritySchema = `CREATE TABLE IF NOT EXISTS authority_leases (
	resource   TEXT PRIMARY KEY,
	epoch      INTEGER NOT NULL CHECK (epoch >= 1), -- last epoch granted; never reused
	holder     TEXT,                                -- NULL once released
	granted_at INTEGER NOT NULL,
	expires_at INTEGER NOT NULL,
	last_tick  INTEGER NOT NULL                     -- last tick that changed this row
) STRICT`

// Lease is one tenure of a resource: who holds it, with which epoch (the
// fencing token to send along with every write), and until which tick.
type Lease struct {
	Resource string `json:"resource"`
	Holder   string `json:"holder"`
	// Epoch is strictly greater than every epoch granted before for the
	// same resource.
	Epoch int64 `json:"epoch"`
	// GrantedAt is the tick of the acquire.
	GrantedAt int64 `json:"granted_at"`
	// ExpiresAt is the first tick at which the lease is no longer live and
	// another holder may acquire the resource.
	ExpiresAt int64 `json:"expires_at"`
}

// Authority is the single trusted issuer of leases and epochs. Every method
// is one BEGIN IMMEDIATE transaction: it either commits its whole change or
// changes nothing.
type Authority struct {
	store *Store
}

// leaseRow is the stored state of one resource, live, expired or released.
type leaseRow struct {
	epoch     int64
	holder    sql.NullString
	grantedAt int64
	expiresAt int64
	lastTick  int64
}

func (r leaseRow) liveAt(now int64) bool { return r.holder.Valid && now < r.expiresAt }

// Acquire grants holder a lease on resource from tick now for ttl ticks,
// with the resource's next epoch. It is refused with ErrLeaseHeld while
// another lease (or holder's own) is live, that is while now is below its
// expiry tick; at exactly the expiry tick it is granted.
func (a *Authority) Acquire(ctx context.Context, resource, holder string, now, ttl int64) (Lease, error) {
	if err := firstError(checkName("resource", resource), checkName("holder", holder), checkTick(now)); err != nil {
		return Lease{}, err
	}
	if err := checkTTL(now, ttl); err != nil {
		return Lease{}, err
	}
	var granted Lease
	err := a.store.inTransaction(ctx, func(tx *sql.Tx) error {
		row, found, err := readLease(ctx, a.store.sql, tx, resource)
		if err != nil {
			return err
		}
		next := int64(1)
		if found {
			if err := checkNotBackwards(resource, row, now); err != nil {
				return err
			}
			if row.liveAt(now) {
				return fmt.Errorf("%w: resource %q is held by %q until tick %d",
					ErrLeaseHeld, resource, row.holder.String, row.expiresAt)
			}
			next = row.epoch + 1
		}
		pauseInsideTransaction("acquire")
		granted = Lease{Resource: resource, Holder: holder, Epoch: next, GrantedAt: now, ExpiresAt: now + ttl}
		if err := a.store.sql.exec(ctx, tx, sqlGrantLease, resource, next, holder, now, now+ttl, now); err != nil {
			return err
		}
		pauseInsideTransaction("acquire-written")
		return nil
	})
	if err != nil {
		return Lease{}, fmt.Errorf("acquire %q for %q at tick %d: %w", resource, holder, now, err)
	}
	return granted, nil
}

// Renew extends held, which must be the resource's current and still live
// lease, to expire at now+ttl. The epoch stays the same: renewal continues
// the tenure, it does not start a new one.
func (a *Authority) Renew(ctx context.Context, held Lease, now, ttl int64) (Lease, error) {
	if err := checkHeld(held, now); err != nil {
		return Lease{}, err
	}
	if err := checkTTL(now, ttl); err != nil {
		return Lease{}, err
	}
	renewed := held
	err := a.changeLiveLease(ctx, held, now, func(tx *sql.Tx, row leaseRow) error {
		renewed.GrantedAt, renewed.ExpiresAt = row.grantedAt, now+ttl
		return a.store.sql.exec(ctx, tx, sqlRenewLease, now+ttl, now, held.Resource)
	})
	if err != nil {
		return Lease{}, fmt.Errorf("renew %q for %q at tick %d: %w", held.Resource, held.Holder, now, err)
	}
	return renewed, nil
}

// Release ends held, which must be the resource's current and still live
// lease, at tick now. The epoch is kept, so the next acquire gets a higher
// one: epochs are never reused.
func (a *Authority) Release(ctx context.Context, held Lease, now int64) error {
	if err := checkHeld(held, now); err != nil {
		return err
	}
	err := a.changeLiveLease(ctx, held, now, func(tx *sql.Tx, _ leaseRow) error {
		return a.store.sql.exec(ctx, tx, sqlReleaseLease, now, now, held.Resource)
	})
	if err != nil {
		return fmt.Errorf("release %q for %q at tick %d: %w", held.Resource, held.Holder, now, err)
	}
	return nil
}

// changeLiveLease runs change in one transaction after checking that held
// is still the resource's live lease at tick now.
func (a *Authority) changeLiveLease(ctx context.Context, held Lease, now int64, change func(*sql.Tx, leaseRow) error) error {
	return a.store.inTransaction(ctx, func(tx *sql.Tx) error {
		row, found, err := readLease(ctx, a.store.sql, tx, held.Resource)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("%w: resource %q was never leased", ErrNotHolder, held.Resource)
		}
		if err := checkNotBackwards(held.Resource, row, now); err != nil {
			return err
		}
		if row.epoch != held.Epoch || !row.holder.Valid || row.holder.String != held.Holder {
			return fmt.Errorf("%w: resource %q is at epoch %d, not %q's epoch %d",
				ErrNotHolder, held.Resource, row.epoch, held.Holder, held.Epoch)
		}
		if !row.liveAt(now) {
			return fmt.Errorf("%w: epoch %d of %q expired at tick %d", ErrLeaseExpired, row.epoch, held.Resource, row.expiresAt)
		}
		return change(tx, row)
	})
}

func checkHeld(held Lease, now int64) error {
	return firstError(checkName("resource", held.Resource), checkName("holder", held.Holder),
		checkEpoch(held.Epoch), checkTick(now))
}

func checkNotBackwards(resource string, row leaseRow, now int64) error {
	if now < row.lastTick {
		return fmt.Errorf("%w: %w: tick %d is before tick %d, the last change to %q",
			ErrInvalidInput, ErrTickBackwards, now, row.lastTick, resource)
	}
	return nil
}

func readLease(ctx context.Context, p *prepared, tx *sql.Tx, resource string) (leaseRow, bool, error) {
	var row leaseRow
	err := p.queryRow(ctx, tx, sqlReadLease, resource).Scan(&row.epoch, &row.holder, &row.grantedAt, &row.expiresAt, &row.lastTick)
	if errors.Is(err, sql.ErrNoRows) {
		return leaseRow{}, false, nil
	}
	if err != nil {
		return leaseRow{}, false, fmt.Errorf("read lease: %w", err)
	}
	return row, true, nil
}
