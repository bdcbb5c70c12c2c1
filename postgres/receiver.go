package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"leases"
	"leases/internal/guard"
	"leases/internal/outcome"
	"leases/internal/rules"
)

// receiver is a store's fenced or unfenced receiver, each operation a
// transaction of its own on the receiver's table only. The fenced one is
// package fence's table (the same rule, decided under the row's lock);
// the unfenced one stores whatever comes, in a table of its own.
type receiver struct {
	store *Store
	mode  leases.Mode
}

var _ leases.Receiver = (*receiver)(nil)

// Mode implements [leases.Receiver.Mode].
func (r *receiver) Mode() leases.Mode { return r.mode }

// Write implements [leases.Receiver.Write].
func (r *receiver) Write(ctx context.Context, resource string, epoch int64, value string) (leases.WriteResult, error) {
	if err := rules.CheckWrite(r.mode, resource, epoch, value); err != nil {
		return leases.WriteResult{}, err
	}
	var result leases.WriteResult
	err := r.store.inTx(ctx, func(tx *sql.Tx) (commit bool, err error) {
		if r.mode == leases.Unfenced {
			// Nothing to compare: whatever comes is stored.
			result = rules.Write(leases.Unfenced, leases.Record{}, false, epoch, value)
			_, err := tx.ExecContext(ctx, r.store.sql.writeUnfenced, resource, epoch, value)
			return true, err
		}
		result, err = r.store.fenced.Write(ctx, tx, resource, epoch, value)
		return result.Outcome == leases.Accepted, err
	})
	if err != nil {
		return leases.WriteResult{}, fmt.Errorf("write %q at epoch %d: %w", resource, epoch, err)
	}
	return result, nil
}

// Fence implements [leases.Receiver.Fence].
func (r *receiver) Fence(ctx context.Context, resource string, epoch int64) (leases.WriteResult, error) {
	if err := rules.CheckObserve(r.mode, resource, epoch); err != nil {
		return leases.WriteResult{}, err
	}
	var result leases.WriteResult
	err := r.store.inTx(ctx, func(tx *sql.Tx) (commit bool, err error) {
		result, err = guard.Observe(r.store.fenced, ctx, tx, resource, epoch)
		return result.Outcome == leases.Accepted, err
	})
	if err != nil {
		return leases.WriteResult{}, fmt.Errorf("observe %q at epoch %d: %w", resource, epoch, err)
	}
	return result, nil
}

// Read implements [leases.Receiver.Read].
func (r *receiver) Read(ctx context.Context, resource string) (record leases.Record, found bool, err error) {
	if err := rules.First(rules.CheckMode(r.mode), rules.CheckName("resource", resource)); err != nil {
		return leases.Record{}, false, err
	}
	if r.mode == leases.Unfenced {
		var value string
		err = r.store.db.QueryRowContext(ctx, r.store.sql.readUnfenced, resource).Scan(&record.Epoch, &value)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return leases.Record{}, false, nil
		case err != nil:
			return leases.Record{}, false, fmt.Errorf("read %q: %w", resource, outcome.BeforeCommit(ctx, err))
		}
		// The unfenced receiver's value always came with its epoch.
		record.ValueEpoch, record.Value = record.Epoch, value
		return record, true, nil
	}
	err = r.store.inTx(ctx, func(tx *sql.Tx) (bool, error) {
		record, found, err = r.store.fenced.Read(ctx, tx, resource)
		return false, err
	})
	if err != nil {
		return leases.Record{}, false, fmt.Errorf("read %q: %w", resource, err)
	}
	return record, found, nil
}

// guardedReceiver is a store's guarded receiver on explicit ticks: one
// transaction locks the lease row (for key share, as AdmitLive does),
// decides with rules.LiveFor whether held is live at the write's tick,
// and then writes as the fenced receiver does, to a fence table of its
// own. It reads the authority's table by design: that is what closes the
// gap.
type guardedReceiver struct {
	store *Store
}

var _ leases.GuardedReceiver = (*guardedReceiver)(nil)

// Write implements [leases.GuardedReceiver.Write].
func (g *guardedReceiver) Write(ctx context.Context, held leases.Lease, now int64, value string) (leases.WriteResult, error) {
	if err := rules.CheckGuarded(held, now, value); err != nil {
		return leases.WriteResult{}, err
	}
	var result leases.WriteResult
	err := g.store.inTx(ctx, func(tx *sql.Tx) (commit bool, err error) {
		row, found, _, err := g.store.lockLease(ctx, tx, held.Resource, lockGuard)
		if err != nil {
			return false, err
		}
		live, err := rules.LiveFor(row, found, held, now)
		switch {
		case err != nil:
			return false, err
		case !live:
			stored, _, err := g.store.guarded.Read(ctx, tx, held.Resource)
			result = leases.WriteResult{Outcome: leases.NotLive, Record: stored}
			return false, err
		}
		result, err = g.store.guarded.Write(ctx, tx, held.Resource, held.Epoch, value)
		return result.Outcome == leases.Accepted, err
	})
	if err != nil {
		return leases.WriteResult{}, fmt.Errorf("guarded write %q at epoch %d at tick %d: %w", held.Resource, held.Epoch, now, err)
	}
	return result, nil
}

// Read implements [leases.GuardedReceiver.Read].
func (g *guardedReceiver) Read(ctx context.Context, resource string) (record leases.Record, found bool, err error) {
	if err := rules.CheckName("resource", resource); err != nil {
		return leases.Record{}, false, err
	}
	err = g.store.inTx(ctx, func(tx *sql.Tx) (bool, error) {
		record, found, err = g.store.guarded.Read(ctx, tx, resource)
		return false, err
	})
	if err != nil {
		return leases.Record{}, false, fmt.Errorf("read %q: %w", resource, err)
	}
	return record, found, nil
}
