// Package sqlitestore is the SQLite backend's implementation: the
// authority's and the receivers' tables in one file, every operation a
// BEGIN IMMEDIATE transaction of its own on the store's one connection.
// Package leases/sqlite is its public face; this package also gives the
// schedule explorer and the tests what users must not have (snapshots of
// the rows, a pause inside a transaction).
package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"leases"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// DefaultBusyTimeout is how long an operation waits for another process's
// write transaction on the same file before it fails. It bounds contention;
// it never orders anything.
const DefaultBusyTimeout = 10 * time.Second

// Store is one process's handle on the SQLite file that holds the
// authority's and the receiver's tables. It owns a single connection, so
// every transaction starts and ends on the same connection.
type Store struct {
	db   *sql.DB
	sql  *prepared
	path string
	// file is the database file as it was opened; nil in memory. SQLite
	// in WAL mode keeps writing to a file that was deleted or replaced,
	// and a new process would then start a fresh file with epochs from 1
	// again; every transaction checks that the path still names this file.
	file os.FileInfo
}

// Open opens (creating if needed) the SQLite file at path in WAL mode with
// the default synchronous setting, and creates the authority's and the
// receiver's tables, each in a transaction of its own. A contending
// transaction waits up to busyTimeout for another process's lock.
func Open(ctx context.Context, path string, busyTimeout time.Duration) (*Store, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: database path is empty", leases.ErrInvalidInput)
	}
	// The driver splits the DSN at the first '?', so such a path would be
	// read as options; refuse it rather than open some other file.
	if strings.ContainsAny(path, "?\x00") {
		return nil, fmt.Errorf("%w: database path %q contains '?' or NUL", leases.ErrInvalidInput, path)
	}
	if err := checkWritable(path); err != nil {
		return nil, err
	}
	options := url.Values{}
	// IMMEDIATE takes the write lock at BEGIN, so a contending writer waits
	// on busy_timeout; a DEFERRED transaction that later upgrades to a write
	// fails with SQLITE_BUSY at once, whatever the timeout.
	options.Set("_txlock", "immediate")
	options.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds()))
	options.Add("_pragma", "journal_mode(WAL)")
	db, err := sql.Open("sqlite", path+"?"+options.Encode())
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	// One connection per process: database/sql cannot then run a
	// transaction's statements on two connections, and the process holds at
	// most one SQLite lock at a time.
	db.SetMaxOpenConns(1)
	s := &Store{db: db, path: path}
	if err := s.createTables(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("open %s: %w", path, err), db.Close())
	}
	if s.sql, err = prepare(ctx, db); err != nil {
		return nil, errors.Join(fmt.Errorf("open %s: %w", path, err), db.Close())
	}
	if path != ":memory:" {
		// Absolute, so that a later change of working directory is not
		// taken for a moved file.
		if s.path, err = filepath.Abs(path); err == nil {
			s.file, err = os.Stat(s.path)
		}
		if err != nil {
			return nil, errors.Join(fmt.Errorf("open %s: %w", path, err), s.Close())
		}
	}
	return s, nil
}

// checkWritable refuses a database file this process cannot write: SQLite
// would quietly open it read-only, and the store would fail only at its
// first write. A file that does not exist yet is fine: SQLite creates it.
func checkWritable(path string) error {
	if path == ":memory:" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open %s: the database file is not writable: %w", path, err)
	}
	return f.Close()
}

// Close releases the store's connection.
func (s *Store) Close() error {
	return errors.Join(s.sql.close(), s.db.Close())
}

// Authority returns the lease authority backed by this store.
func (s *Store) Authority() *Authority {
	return &Authority{store: s}
}

// Receiver returns a receiver backed by this store, fenced or not.
func (s *Store) Receiver(mode leases.Mode) *Receiver {
	return &Receiver{store: s, mode: mode}
}

func (s *Store) createTables(ctx context.Context) error {
	// Two transactions, not one: even the schema never spans the
	// authority's and the receiver's tables.
	for _, ddl := range []string{authoritySchema, receiverSchema} {
		if err := s.inTransaction(ctx, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, ddl)
			return err
		}); err != nil {
			return fmt.Errorf("create tables: %w", err)
		}
	}
	return nil
}

// inTransaction runs fn in one BEGIN IMMEDIATE transaction (the DSN's
// _txlock) and commits only if fn succeeds, so a failed or refused
// operation changes nothing.
func (s *Store) inTransaction(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := s.checkFile(); err != nil {
		return errors.Join(err, tx.Rollback())
	}
	if err := fn(tx); err != nil {
		return errors.Join(err, ignoreDone(tx.Rollback()))
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// checkFile fails when the path no longer names the file this store
// opened. It runs inside the transaction, under the write lock.
func (s *Store) checkFile() error {
	if s.file == nil {
		return nil
	}
	now, err := os.Stat(s.path)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", leases.ErrDatabaseMoved, s.path, err)
	}
	if !os.SameFile(now, s.file) {
		return fmt.Errorf("%w: %s is another file now", leases.ErrDatabaseMoved, s.path)
	}
	return nil
}

func ignoreDone(err error) error {
	if errors.Is(err, sql.ErrTxDone) {
		return nil
	}
	return err
}

// IntegrityCheck runs SQLite's PRAGMA integrity_check and returns what it
// says: "ok" for a sound file, otherwise the problems it found, one per
// line.
func (s *Store) IntegrityCheck(ctx context.Context) (string, error) {
	rows, err := s.db.QueryContext(ctx, "PRAGMA integrity_check")
	if err != nil {
		return "", fmt.Errorf("integrity check: %w", err)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return "", fmt.Errorf("integrity check: %w", err)
		}
		lines = append(lines, line)
	}
	if err := rows.Err(); err != nil {
		return "", fmt.Errorf("integrity check: %w", err)
	}
	return strings.Join(lines, "\n"), nil
}
