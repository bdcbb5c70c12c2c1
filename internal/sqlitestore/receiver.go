package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"leases"
	"leases/internal/rules"
)

// The fenced and the unfenced receiver keep their records in tables of
// their own: an unfenced write must never lower a fence.
const (
	fencedSchema = `CREATE TABLE IF NOT EXISTS receiver_records (
	resource    TEXT PRIMARY KEY,
	epoch       INTEGER NOT NULL CHECK (epoch >= 1), -- highest epoch committed, by a write or an observe
	value_epoch INTEGER CHECK (value_epoch >= 1),    -- the epoch the value came with; NULL before any value
	value       TEXT,
	CHECK ((value IS NULL) = (value_epoch IS NULL) AND value_epoch <= epoch)
) STRICT`
	unfencedSchema = `CREATE TABLE IF NOT EXISTS unfenced_records (
	resource TEXT PRIMARY KEY,
	epoch    INTEGER NOT NULL CHECK (epoch >= 1), -- the last write's epoch, not compared
	value    TEXT NOT NULL
) STRICT`
)

// Receiver is a receiver on one of a store's two receiver tables, the
// fenced or the unfenced one. It never reads the authority's table.
type Receiver struct {
	store *Store
	mode  leases.Mode
}

var _ leases.Receiver = (*Receiver)(nil)

// Mode implements [leases.Receiver.Mode].
func (r *Receiver) Mode() leases.Mode { return r.mode }

// Write implements [leases.Receiver.Write].
func (r *Receiver) Write(ctx context.Context, resource string, epoch int64, value string) (leases.WriteResult, error) {
	if err := rules.CheckWrite(r.mode, resource, epoch, value); err != nil {
		return leases.WriteResult{}, err
	}
	var result leases.WriteResult
	err := r.store.inTransaction(ctx, func(tx *sql.Tx) error {
		var stored leases.Record
		found := false
		if r.mode == leases.Fenced { // an unfenced receiver has nothing to compare
			var err error
			if stored, found, err = r.read(ctx, tx, resource); err != nil {
				return err
			}
		}
		result = rules.Write(r.mode, stored, found, epoch, value)
		pauseInsideTransaction("write")
		if result.Outcome != leases.Accepted {
			return nil
		}
		if err := r.write(ctx, tx, resource, epoch, value); err != nil {
			return err
		}
		pauseInsideTransaction("write-written")
		return nil
	})
	if err != nil {
		return leases.WriteResult{}, fmt.Errorf("write %q at epoch %d: %w", resource, epoch, err)
	}
	return result, nil
}

// Fence implements [leases.Receiver.Fence].
func (r *Receiver) Fence(ctx context.Context, resource string, epoch int64) (leases.WriteResult, error) {
	if err := rules.CheckObserve(r.mode, resource, epoch); err != nil {
		return leases.WriteResult{}, err
	}
	var result leases.WriteResult
	err := r.store.inTransaction(ctx, func(tx *sql.Tx) error {
		stored, found, err := r.read(ctx, tx, resource)
		if err != nil {
			return err
		}
		result = rules.Observe(stored, found, epoch)
		pauseInsideTransaction("observe")
		if result.Outcome != leases.Accepted {
			return nil
		}
		return r.store.sql.exec(ctx, tx, sqlObserveRecord, resource, epoch)
	})
	if err != nil {
		return leases.WriteResult{}, fmt.Errorf("observe %q at epoch %d: %w", resource, epoch, err)
	}
	return result, nil
}

// Read implements [leases.Receiver.Read].
func (r *Receiver) Read(ctx context.Context, resource string) (record leases.Record, found bool, err error) {
	if err := rules.First(rules.CheckMode(r.mode), rules.CheckName("resource", resource)); err != nil {
		return leases.Record{}, false, err
	}
	err = r.store.inTransaction(ctx, func(tx *sql.Tx) error {
		record, found, err = r.read(ctx, tx, resource)
		return err
	})
	if err != nil {
		return leases.Record{}, false, fmt.Errorf("read %q: %w", resource, err)
	}
	return record, found, nil
}

// write stores an accepted value in the receiver's own table.
func (r *Receiver) write(ctx context.Context, tx *sql.Tx, resource string, epoch int64, value string) error {
	if r.mode == leases.Unfenced {
		return r.store.sql.exec(ctx, tx, sqlWriteUnfenced, resource, epoch, value)
	}
	return r.store.sql.exec(ctx, tx, sqlWriteRecord, resource, epoch, epoch, value)
}

// read returns the resource's record from the receiver's own table; found
// is false only when there is no record, never when the read failed.
func (r *Receiver) read(ctx context.Context, tx *sql.Tx, resource string) (leases.Record, bool, error) {
	query := sqlReadRecord
	if r.mode == leases.Unfenced {
		query = sqlReadUnfenced
	}
	return r.store.readRecord(ctx, tx, query, resource)
}

// readRecord runs query, one of the receivers' reads of (epoch,
// value_epoch, value) by resource; found is false only when there is no
// record, never when the read failed.
func (s *Store) readRecord(ctx context.Context, tx *sql.Tx, query, resource string) (leases.Record, bool, error) {
	var rec leases.Record
	var valueEpoch sql.NullInt64
	var value sql.NullString
	err := s.sql.queryRow(ctx, tx, query, resource).Scan(&rec.Epoch, &valueEpoch, &value)
	if errors.Is(err, sql.ErrNoRows) {
		return leases.Record{}, false, nil
	}
	if err != nil {
		return leases.Record{}, false, fmt.Errorf("read record: %w", err)
	}
	rec.ValueEpoch, rec.Value = valueEpoch.Int64, value.String
	return rec, true, nil
}
