package explore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"leases/ops"
)

// toolDB is the tool server's database in the explored model of
// operations: an in-memory SQLite database of the tool's own (apart from
// the backend's store), holding the record of operations (package ops)
// and the effects' rows, one per effect done. It can be snapshot and
// restored, as the backend's store is.
type toolDB struct {
	db     *sql.DB
	record *ops.Table // nil in the unprotected variant
	// saved are the rows of every snapshot taken, by its name, to
	// restore them exactly.
	saved map[string][]tableRows
	// stmts are the statements compiled once: compiling took half the
	// explorer's time.
	stmts map[string]*sql.Stmt
}

// stmt is query, compiled on its first use (prepare compiles them all
// first).
func (t *toolDB) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if st, ok := t.stmts[query]; ok {
		return st, nil
	}
	st, err := t.db.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	t.stmts[query] = st
	return st, nil
}

const toolEffectsTable = "tool_effects"

// tableRows are one table's rows, every column, in selectAll's order.
type tableRows struct {
	table   string
	columns []string
	rows    [][]any
}

// volatile are the columns that never change what a call answers: when
// a record was written, and the fence's marker of admitted transactions
// (a counter and a random tag). They are left out of a snapshot's name,
// so that states that differ only in them are one state.
var volatile = []string{"created_at", "tx_seq", "tx_tag", "prev_epoch", "prev_seq", "prev_tag", "tx_final"}

func openToolDB(ctx context.Context, withRecord bool) (*toolDB, error) {
	db, err := sql.Open("sqlite", ":memory:?_txlock=immediate")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1) // an in-memory database is its one connection
	t := &toolDB{db: db, saved: map[string][]tableRows{}, stmts: map[string]*sql.Stmt{}}
	if withRecord {
		if t.record, err = ops.New(db, ops.Options{}); err == nil {
			err = t.record.Create(ctx)
		}
	}
	if err == nil {
		_, err = db.ExecContext(ctx, "CREATE TABLE "+toolEffectsTable+" (epoch INTEGER NOT NULL, key TEXT NOT NULL)")
	}
	if err == nil {
		err = t.prepare(ctx)
	}
	if err != nil {
		return nil, errors.Join(err, t.close())
	}
	return t, nil
}

// prepare compiles every statement before the first transaction: with
// one connection, compiling one while a transaction holds it would wait
// for ever.
func (t *toolDB) prepare(ctx context.Context) error {
	queries := []string{effectsCount, effectInsert}
	for _, table := range t.tables() {
		rows, err := t.readTable(ctx, table)
		if err != nil {
			return err
		}
		queries = append(queries, deleteAll(table), insertRow(rows))
	}
	for _, q := range queries {
		if _, err := t.stmt(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

const (
	effectsCount = "SELECT count(*) FROM " + toolEffectsTable + " WHERE epoch = ? AND key = ?"
	effectInsert = "INSERT INTO " + toolEffectsTable + " (epoch, key) VALUES (?, ?)"
)

// selectAll reads every row of table: in the order they were written
// for the effects, in key order for the record's tables (without rowid).
func selectAll(table string) string {
	if table == toolEffectsTable {
		return `SELECT * FROM "` + table + `" ORDER BY rowid`
	}
	return `SELECT * FROM "` + table + `"`
}

func deleteAll(table string) string { return `DELETE FROM "` + table + `"` }

func insertRow(r tableRows) string {
	return `INSERT INTO "` + r.table + `" (` + strings.Join(r.columns, ", ") + `) VALUES (?` +
		strings.Repeat(", ?", len(r.columns)-1) + `)`
}

func (t *toolDB) close() error {
	for _, st := range t.stmts {
		_ = st.Close()
	}
	return t.db.Close()
}

func (t *toolDB) tables() []string {
	if t.record == nil {
		return []string{toolEffectsTable}
	}
	return []string{t.record.Name(), t.record.Name() + "_fence", toolEffectsTable}
}

// snapshot names the database's state, and keeps its rows to restore.
func (t *toolDB) snapshot(ctx context.Context) (string, error) {
	var all []tableRows
	var name strings.Builder
	for _, table := range t.tables() {
		rows, err := t.readTable(ctx, table)
		if err != nil {
			return "", err
		}
		all = append(all, rows)
		rows.name(&name)
	}
	key := name.String()
	if _, ok := t.saved[key]; !ok {
		t.saved[key] = all
	}
	return key, nil
}

// name writes the rows without the volatile columns, in sorted order:
// the order rows were written in changes no answer either (the effects
// are counted, the record is looked up by key). Each value is written
// with its type and self-delimited (a number ends with ';', a string is
// quoted), so that two tables' names are equal only when their rows are.
// Formatting them with fmt and encoding/json was a tenth of the model's
// time.
func (r tableRows) name(to *strings.Builder) {
	kept := make([]bool, len(r.columns))
	for i, column := range r.columns {
		kept[i] = !slices.Contains(volatile, column)
	}
	out := make([]string, 0, len(r.rows))
	var b []byte
	for _, row := range r.rows {
		b = b[:0]
		for i, v := range row {
			if kept[i] {
				b = appendValue(b, v)
			}
		}
		out = append(out, string(b))
	}
	slices.Sort(out)
	to.WriteString("[")
	for _, row := range out {
		to.WriteString(row)
		to.WriteString("|")
	}
	to.WriteString("]")
}

// appendValue appends v, as database/sql scans it into an any, with a
// letter for its type.
func appendValue(b []byte, v any) []byte {
	switch v := v.(type) {
	case nil:
		return append(b, 'n')
	case int64:
		return append(strconv.AppendInt(append(b, 'i'), v, 10), ';')
	case float64:
		return append(strconv.AppendFloat(append(b, 'f'), v, 'g', -1, 64), ';')
	case bool:
		return strconv.AppendBool(append(b, 't'), v)
	case string:
		return strconv.AppendQuote(append(b, 's'), v)
	case []byte:
		return strconv.AppendQuote(append(b, 'b'), string(v))
	}
	return strconv.AppendQuote(append(b, 'v'), fmt.Sprintf("%T %#v", v, v))
}

func (t *toolDB) readTable(ctx context.Context, table string) (tableRows, error) {
	st, err := t.stmt(ctx, selectAll(table))
	if err != nil {
		return tableRows{}, err
	}
	rows, err := st.QueryContext(ctx)
	if err != nil {
		return tableRows{}, err
	}
	defer rows.Close()
	r := tableRows{table: table}
	if r.columns, err = rows.Columns(); err != nil {
		return r, err
	}
	for rows.Next() {
		row := make([]any, len(r.columns))
		ptrs := make([]any, len(row))
		for i := range row {
			ptrs[i] = &row[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return r, err
		}
		for i, v := range row {
			// An empty blob reads as a nil []byte, which binds as NULL:
			// restored so, a state would come back other than it was
			// (a record's empty body as no body).
			if b, ok := v.([]byte); ok && b == nil {
				row[i] = []byte{}
			}
		}
		r.rows = append(r.rows, row)
	}
	return r, rows.Err()
}

// restore makes the database hold exactly the rows of the snapshot key.
func (t *toolDB) restore(ctx context.Context, key string) error {
	all, ok := t.saved[key]
	if !ok {
		return errors.New("restore the tool's database: no such snapshot")
	}
	tx, err := t.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	for _, r := range all {
		if err = t.restoreIn(ctx, tx, r); err != nil {
			return errors.Join(fmt.Errorf("restore the tool's database: %w", err), tx.Rollback())
		}
	}
	return tx.Commit()
}

func (t *toolDB) restoreIn(ctx context.Context, tx *sql.Tx, r tableRows) error {
	del, err := t.stmt(ctx, deleteAll(r.table))
	if err != nil {
		return err
	}
	if _, err := tx.StmtContext(ctx, del).ExecContext(ctx); err != nil {
		return err
	}
	insert, err := t.stmt(ctx, insertRow(r))
	if err != nil {
		return err
	}
	for _, row := range r.rows {
		if _, err := tx.StmtContext(ctx, insert).ExecContext(ctx, row...); err != nil {
			return err
		}
	}
	return nil
}

// effects counts the effects of the operation (epoch, key).
func (t *toolDB) effects(ctx context.Context, epoch int64, key string) (int, error) {
	st, err := t.stmt(ctx, effectsCount)
	if err != nil {
		return 0, err
	}
	var n int
	err = st.QueryRowContext(ctx, epoch, key).Scan(&n)
	return n, err
}

// effect is the tool's effect: one row, in tx.
func (t *toolDB) effect(ctx context.Context, tx *sql.Tx, epoch int64, key string) error {
	st, err := t.stmt(ctx, effectInsert)
	if err == nil {
		_, err = tx.StmtContext(ctx, st).ExecContext(ctx, epoch, key)
	}
	return err
}
