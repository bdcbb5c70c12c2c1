package sqlitestore

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"leases"
)

// tables are the store's tables, in the order snapshots list them, with
// their number of columns.
var tables = [...]struct {
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

// written tracks, for the explorer, which tables may have changed since
// the last Snapshot read them: every statement that writes marks its
// table (even one whose transaction then rolls back), and Snapshot reads
// only the marked ones again. A table not marked still holds what its
// last encoding says, so a Restore need not rewrite a table whose
// encoding is already the target's. This holds only while nothing but
// this store writes the database: the explorer's in-memory store.
type written struct {
	mu    sync.Mutex
	dirty [len(tables)]bool   // by tables' index
	seen  [len(tables)][]byte // each table's last encoding
	valid bool                // false until the first Snapshot has read every table
}

// writes maps every statement that writes to the index of its table.
var writes = map[string]int{
	sqlPutLease: 0, sqlWriteRecord: 1, sqlObserveRecord: 1, sqlWriteUnfenced: 2, sqlWriteGuarded: 3,
}

func (w *written) mark(statement string) {
	i, ok := writes[statement]
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.dirty[i] = true
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
	w := &s.sql.written
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, t := range tables {
		if w.valid && !w.dirty[i] {
			continue
		}
		encoded, err := s.readTable(ctx, t.name, t.columns)
		if err != nil {
			return nil, fmt.Errorf("snapshot: %w", err)
		}
		w.seen[i], w.dirty[i] = encoded, false
	}
	w.valid = true
	return append(append([]byte("["), bytes.Join(w.seen[:], []byte(","))...), ']'), nil
}

// readTable encodes every row of one table, read by one SELECT, which
// SQLite runs as a read transaction of its own: no BEGIN and COMMIT
// around it, and none spanning two tables.
func (s *Store) readTable(ctx context.Context, table string, columns int) ([]byte, error) {
	rows, err := s.sql.byText[selectAll(table)].QueryContext(ctx)
	if err != nil {
		return nil, err
	}
	all := [][]any{}
	for rows.Next() {
		row := make([]any, columns)
		dest := make([]any, columns)
		for j := range row {
			dest[j] = &row[j]
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, errors.Join(err, rows.Close())
		}
		all = append(all, row)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, err
	}
	return json.Marshal(all)
}

// Restore makes the tables hold exactly the rows of a Snapshot, each
// table in a transaction of its own; a table that already holds them is
// left alone. The whole snapshot is decoded and checked before any table
// is touched, so a snapshot that is not one changes nothing.
func (s *Store) Restore(ctx context.Context, snapshot []byte) error {
	var parts []json.RawMessage
	if err := json.Unmarshal(snapshot, &parts); err != nil || len(parts) != len(tables) {
		return fmt.Errorf("%w: restore: not a snapshot: %v", leases.ErrInvalidInput, err)
	}
	w := &s.sql.written
	w.mu.Lock()
	defer w.mu.Unlock()
	rows := make([][][]any, len(tables)) // nil: the table holds them already
	for i, t := range tables {
		if w.valid && !w.dirty[i] && bytes.Equal(w.seen[i], parts[i]) {
			continue
		}
		var err error
		if rows[i], err = decodeRows(parts[i], t.columns); err != nil {
			return fmt.Errorf("%w: restore: not a snapshot of %s: %w", leases.ErrInvalidInput, t.name, err)
		}
	}
	for i, t := range tables {
		if rows[i] == nil {
			continue
		}
		err := s.inTransaction(ctx, func(tx *sql.Tx) error {
			if _, err := tx.StmtContext(ctx, s.sql.byText[deleteAll(t.name)]).ExecContext(ctx); err != nil {
				return err
			}
			for _, row := range rows[i] {
				if _, err := tx.StmtContext(ctx, s.sql.byText[insertRow(t.name, t.columns)]).ExecContext(ctx, row...); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			w.dirty[i] = true
			return fmt.Errorf("restore %s: %w", t.name, err)
		}
		w.seen[i], w.dirty[i] = append([]byte(nil), parts[i]...), false
	}
	return nil
}

// decodeRows decodes one table's part of a snapshot: rows of columns
// cells each, every number an integer. It is never nil.
func decodeRows(part []byte, columns int) ([][]any, error) {
	rows := [][]any{}
	dec := json.NewDecoder(bytes.NewReader(part))
	dec.UseNumber() // every number in these tables is an integer
	if err := dec.Decode(&rows); err != nil {
		return nil, err
	}
	for _, row := range rows {
		if len(row) != columns {
			return nil, fmt.Errorf("a row of %d cells, want %d", len(row), columns)
		}
		for j, cell := range row {
			if n, ok := cell.(json.Number); ok {
				var err error
				if row[j], err = n.Int64(); err != nil {
					return nil, err
				}
			}
		}
	}
	if rows == nil { // "null"
		rows = [][]any{}
	}
	return rows, nil
}
