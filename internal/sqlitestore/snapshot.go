package sqlitestore

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"leases"
)

// tables are the store's tables, in the order snapshots list them, with
// their number of columns.
var tables = []struct {
	name    string
	columns int
}{
	{"authority_leases", 6},
	{"receiver_records", 4},
	{"unfenced_records", 3},
	{"guarded_records", 4},
}

func selectAll(table string) string { return "SELECT * FROM " + table + " ORDER BY resource" }
func deleteAll(table string) string { return "DELETE FROM " + table }
func insertRow(table string, columns int) string {
	return "INSERT INTO " + table + " VALUES (?" + strings.Repeat(", ?", columns-1) + ")"
}

// snapshotStatements are the statements Snapshot and Restore run, to be
// prepared once with the others.
func snapshotStatements() []string {
	var texts []string
	for _, t := range tables {
		texts = append(texts, selectAll(t.name), deleteAll(t.name), insertRow(t.name, t.columns))
	}
	return texts
}

// Snapshot returns every row of the store's tables, encoded canonically
// (tables and rows in a fixed order), and Restore puts them back. They
// exist for the schedule explorer, which runs the real authority and
// receivers from one state many times over: restoring a snapshot is the
// same as rolling back to a savepoint, and two snapshots are equal exactly
// when the tables hold the same rows. They are not part of the public API:
// restoring an old snapshot hands out epochs again. Like everything else
// here, they never span two tables in one transaction, so use them on a
// store that nobody else uses at the same time.
func (s *Store) Snapshot(ctx context.Context) ([]byte, error) {
	if err := errors.Join(s.usable(), s.checkFiles()); err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	all := make([][][]any, len(tables))
	for i, t := range tables {
		// One SELECT per table, which SQLite runs as a read transaction of
		// its own: no BEGIN and COMMIT around it, and none spanning two
		// tables.
		rows, err := s.sql.byText[selectAll(t.name)].QueryContext(ctx)
		if err != nil {
			return nil, fmt.Errorf("snapshot: %w", err)
		}
		for rows.Next() {
			row := make([]any, t.columns)
			dest := make([]any, t.columns)
			for j := range row {
				dest[j] = &row[j]
			}
			if err := rows.Scan(dest...); err != nil {
				return nil, errors.Join(fmt.Errorf("snapshot: %w", err), rows.Close())
			}
			all[i] = append(all[i], row)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return nil, fmt.Errorf("snapshot: %w", err)
		}
	}
	return json.Marshal(all)
}

// Restore makes the tables hold exactly the rows of a Snapshot, each
// table in a transaction of its own.
func (s *Store) Restore(ctx context.Context, snapshot []byte) error {
	var all [][][]any
	dec := json.NewDecoder(bytes.NewReader(snapshot))
	dec.UseNumber() // every number in these tables is an integer
	if err := dec.Decode(&all); err != nil || len(all) != len(tables) {
		return fmt.Errorf("%w: restore: not a snapshot: %v", leases.ErrInvalidInput, err)
	}
	for i, t := range tables {
		err := s.inTransaction(ctx, func(tx *sql.Tx) error {
			if err := s.sql.exec(ctx, tx, deleteAll(t.name)); err != nil {
				return err
			}
			for _, row := range all[i] {
				for j, cell := range row {
					if n, ok := cell.(json.Number); ok {
						var err error
						if row[j], err = n.Int64(); err != nil {
							return err
						}
					}
				}
				if err := s.sql.exec(ctx, tx, insertRow(t.name, t.columns), row...); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("restore %s: %w", t.name, err)
		}
	}
	return nil
}
