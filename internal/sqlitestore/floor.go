package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// OpenFloor opens path (or ":memory:") with the store's settings
// (IMMEDIATE transactions, the default busy timeout, WAL, one
// connection) and a one-row table of its own: a bare database, the floor
// that the store's operations are measured against.
func OpenFloor(path string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", fmt.Sprintf("%s?_txlock=immediate&_pragma=busy_timeout(%d)&_pragma=journal_mode(WAL)",
		path, DefaultBusyTimeout.Milliseconds()))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE TABLE IF NOT EXISTS bare (k TEXT PRIMARY KEY, v INTEGER NOT NULL) STRICT`); err != nil {
		return nil, errors.Join(err, db.Close())
	}
	return db, nil
}

// FloorUpsert is the floor's write: one row, inserted or replaced.
const FloorUpsert = `INSERT INTO bare (k, v) VALUES (?, ?) ON CONFLICT (k) DO UPDATE SET v = excluded.v`

// FloorRead is the floor's read of that row.
const FloorRead = `SELECT v FROM bare WHERE k = ?`

// FloorTransaction runs fn in one transaction of a floor database and
// commits it.
func FloorTransaction(ctx context.Context, db *sql.DB, fn func(*sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return errors.Join(err, tx.Rollback())
	}
	return tx.Commit()
}
