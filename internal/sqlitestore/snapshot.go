package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"leases"
)

// Snapshot returns every row of the authority's and the receiver's tables,
// encoded canonically (in key order), and Restore puts them back. They
// exist for tools that run the real authority and receiver from one state
// many times over, as the schedule explorer does: restoring a snapshot is
// the same as rolling back to a savepoint, and two snapshots are equal
// exactly when the tables hold the same rows. Like everything else here,
// they never span both tables in one transaction: each table is read or
// written on its own, so use them on a store that nobody else uses at the
// same time.
func (s *Store) Snapshot(ctx context.Context) ([]byte, error) {
	// Each table is read by one SELECT, which SQLite runs as a read
	// transaction of its own: no BEGIN and COMMIT around it, and none
	// spanning both tables.
	var rows snapshotRows
	err := errors.Join(
		s.checkFile(),
		scanAll(ctx, s.sql.byText[sqlAllLeases], func(scan func(...any) error) error {
			rows.Leases = append(rows.Leases, snapshotLease{})
			l := &rows.Leases[len(rows.Leases)-1]
			return scan(&l.Resource, &l.Epoch, &l.Holder, &l.GrantedAt, &l.ExpiresAt, &l.LastTick)
		}),
		scanAll(ctx, s.sql.byText[sqlAllRecords], func(scan func(...any) error) error {
			rows.Records = append(rows.Records, snapshotRecord{})
			r := &rows.Records[len(rows.Records)-1]
			return scan(&r.Resource, &r.Epoch, &r.ValueEpoch, &r.Value)
		}))
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	return json.Marshal(rows)
}

// scanAll runs query and hands each row's Scan to row.
func scanAll(ctx context.Context, query *sql.Stmt, row func(scan func(...any) error) error) error {
	rows, err := query.QueryContext(ctx)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := row(rows.Scan); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Restore makes the tables hold exactly the rows of a Snapshot, each
// table in a transaction of its own.
func (s *Store) Restore(ctx context.Context, snapshot []byte) error {
	var rows snapshotRows
	if err := json.Unmarshal(snapshot, &rows); err != nil {
		return fmt.Errorf("%w: restore: not a snapshot: %w", leases.ErrInvalidInput, err)
	}
	err := errors.Join(
		s.inTransaction(ctx, func(tx *sql.Tx) error {
			if err := s.sql.exec(ctx, tx, sqlDeleteLeases); err != nil {
				return err
			}
			for _, r := range rows.Leases {
				if err := s.sql.exec(ctx, tx, sqlInsertLease, r.Resource, r.Epoch, r.Holder, r.GrantedAt, r.ExpiresAt, r.LastTick); err != nil {
					return err
				}
			}
			return nil
		}),
		s.inTransaction(ctx, func(tx *sql.Tx) error {
			if err := s.sql.exec(ctx, tx, sqlDeleteRecords); err != nil {
				return err
			}
			for _, r := range rows.Records {
				if err := s.sql.exec(ctx, tx, sqlInsertRecord, r.Resource, r.Epoch, r.ValueEpoch, r.Value); err != nil {
					return err
				}
			}
			return nil
		}))
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
