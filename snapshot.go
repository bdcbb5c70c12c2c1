package leases

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
)

// Snapshot returns every row of the authority's and the receiver's tables,
// encoded canonically (in key order), and Restore puts them back. They
// exist for tools that run the real authority and receiver from one state
// many times over, as the schedule explorer does: restoring a snapshot is
// the same as rolling back to a savepoint, and two snapshots are equal
// exactly when the tables hold the same rows. Restore replaces whatever the
// tables hold; use it where no other process shares the database.
func (s *Store) Snapshot(ctx context.Context) ([]byte, error) {
	var rows snapshotRows
	err := s.inTransaction(ctx, func(tx *sql.Tx) error {
		leaseRows, err := tx.StmtContext(ctx, s.sql.byText[sqlAllLeases]).QueryContext(ctx)
		if err != nil {
			return err
		}
		for leaseRows.Next() {
			var r snapshotLease
			if err := leaseRows.Scan(&r.Resource, &r.Epoch, &r.Holder, &r.GrantedAt, &r.ExpiresAt, &r.LastTick); err != nil {
				return err
			}
			rows.Leases = append(rows.Leases, r)
		}
		if err := leaseRows.Close(); err != nil {
			return err
		}
		recordRows, err := tx.StmtContext(ctx, s.sql.byText[sqlAllRecords]).QueryContext(ctx)
		if err != nil {
			return err
		}
		defer recordRows.Close()
		for recordRows.Next() {
			var r snapshotRecord
			if err := recordRows.Scan(&r.Resource, &r.Epoch, &r.ValueEpoch, &r.Value); err != nil {
				return err
			}
			rows.Records = append(rows.Records, r)
		}
		return recordRows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	return json.Marshal(rows)
}

// Restore makes the tables hold exactly the rows of a Snapshot, in one
// transaction.
func (s *Store) Restore(ctx context.Context, snapshot []byte) error {
	var rows snapshotRows
	if err := json.Unmarshal(snapshot, &rows); err != nil {
		return fmt.Errorf("%w: restore: not a snapshot: %w", ErrInvalidInput, err)
	}
	err := s.inTransaction(ctx, func(tx *sql.Tx) error {
		for _, text := range []string{sqlDeleteLeases, sqlDeleteRecords} {
			if err := s.sql.exec(ctx, tx, text); err != nil {
				return err
			}
		}
		for _, r := range rows.Leases {
			if err := s.sql.exec(ctx, tx, sqlInsertLease, r.Resource, r.Epoch, r.Holder, r.GrantedAt, r.ExpiresAt, r.LastTick); err != nil {
				return err
			}
		}
		for _, r := range rows.Records {
			if err := s.sql.exec(ctx, tx, sqlInsertRecord, r.Resource, r.Epoch, r.ValueEpoch, r.Value); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	return nil
}

// snapshotRows is every row of both tables; NULLs stay NULL.
type snapshotRows struct {
	Leases  []snapshotLease  `json:"leases"`
	Records []snapshotRecord `json:"records"`
}

type snapshotLease struct {
	Resource  string  `json:"resource"`
	Epoch     int64   `json:"epoch"`
	Holder    *string `json:"holder"`
	GrantedAt int64   `json:"granted_at"`
	ExpiresAt int64   `json:"expires_at"`
	LastTick  int64   `json:"last_tick"`
}

type snapshotRecord struct {
	Resource   string  `json:"resource"`
	Epoch      int64   `json:"epoch"`
	ValueEpoch *int64  `json:"value_epoch"`
	Value      *string `json:"value"`
}
