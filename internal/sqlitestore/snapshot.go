package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"leases"
)

// Snapshot returns every row of the store's tables, encoded canonically
// (in key order), and Restore puts them back. They exist for the schedule
// explorer, which runs the real authority and receiver from one state many
// times over: restoring a snapshot is the same as rolling back to a
// savepoint, and two snapshots are equal exactly when the tables hold the
// same rows. They are not part of the public API: restoring an old
// snapshot hands out epochs again. Like everything else here, they never
// span two tables in one transaction, so use them on a store that nobody
// else uses at the same time.
func (s *Store) Snapshot(ctx context.Context) ([]byte, error) {
	if err := errors.Join(s.usable(), s.checkFiles()); err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	// Each table is read by one SELECT, which SQLite runs as a read
	// transaction of its own: no BEGIN and COMMIT around it, and none
	// spanning two tables.
	var rows snapshotRows
	err := errors.Join(
		scanAll(ctx, s.sql.byText[sqlAllLeases], func(scan func(...any) error) error {
			rows.Leases = append(rows.Leases, snapshotLease{})
			l := &rows.Leases[len(rows.Leases)-1]
			return scan(&l.Resource, &l.Epoch, &l.Holder, &l.GrantedAt, &l.ExpiresAt, &l.LastTick)
		}),
		scanAll(ctx, s.sql.byText[sqlAllRecords], func(scan func(...any) error) error {
			rows.Records = append(rows.Records, snapshotRecord{})
			r := &rows.Records[len(rows.Records)-1]
			return scan(&r.Resource, &r.Epoch, &r.ValueEpoch, &r.Value)
		}),
		scanAll(ctx, s.sql.byText[sqlAllUnfenced], func(scan func(...any) error) error {
			rows.Unfenced = append(rows.Unfenced, snapshotUnfenced{})
			u := &rows.Unfenced[len(rows.Unfenced)-1]
			return scan(&u.Resource, &u.Epoch, &u.Value)
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
	replace := func(deleteAll, insert string, n int, args func(int) []any) error {
		return s.inTransaction(ctx, func(tx *sql.Tx) error {
			if err := s.sql.exec(ctx, tx, deleteAll); err != nil {
				return err
			}
			for i := range n {
				if err := s.sql.exec(ctx, tx, insert, args(i)...); err != nil {
					return err
				}
			}
			return nil
		})
	}
	err := errors.Join(
		replace(sqlDeleteLeases, sqlInsertLease, len(rows.Leases), func(i int) []any {
			r := rows.Leases[i]
			return []any{r.Resource, r.Epoch, r.Holder, r.GrantedAt, r.ExpiresAt, r.LastTick}
		}),
		replace(sqlDeleteRecords, sqlInsertRecord, len(rows.Records), func(i int) []any {
			r := rows.Records[i]
			return []any{r.Resource, r.Epoch, r.ValueEpoch, r.Value}
		}),
		replace(sqlDeleteUnfenced, sqlInsertUnfenced, len(rows.Unfenced), func(i int) []any {
			r := rows.Unfenced[i]
			return []any{r.Resource, r.Epoch, r.Value}
		}))
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	return nil
}

// snapshotRows is every row of every table; NULLs stay NULL.
type snapshotRows struct {
	Leases   []snapshotLease    `json:"leases"`
	Records  []snapshotRecord   `json:"records"`
	Unfenced []snapshotUnfenced `json:"unfenced"`
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

type snapshotUnfenced struct {
	Resource string `json:"resource"`
	Epoch    int64  `json:"epoch"`
	Value    string `json:"value"`
}
