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
	"strings"
	"sync/atomic"
	"time"

	"leases"
	"leases/fence"

	"modernc.org/sqlite"
)

// DefaultBusyTimeout is how long an operation waits for another process's
// write transaction on the same file before it fails. It bounds contention;
// it never orders anything.
const DefaultBusyTimeout = 10 * time.Second

// DefaultWatchInterval is how often a waiter looks for another process's
// change to a lease (see Authority.Changed).
const DefaultWatchInterval = 10 * time.Millisecond

// The store's own errors, each matching leases.ErrStoreUnusable: after
// either, the store answers nothing more (package leases/sqlite documents
// them).
var (
	ErrDatabaseMoved  error = &unusable{"database file deleted or replaced"}
	ErrReopenRequired error = &unusable{"store must be reopened"}
)

// unusable is a reason the store can answer no more.
type unusable struct{ reason string }

func (e *unusable) Error() string { return e.reason }
func (e *unusable) Unwrap() error { return leases.ErrStoreUnusable }

// Config is how a store opens its file.
type Config struct {
	// BusyTimeout bounds how long an operation waits for another
	// process's write lock; zero fails at once.
	BusyTimeout time.Duration
	// WatchInterval is how often a waiter looks for another process's
	// change; zero means DefaultWatchInterval.
	WatchInterval time.Duration
}

// Store is one process's handle on the SQLite file that holds the
// authority's and the receivers' tables. It owns a single connection, so
// every transaction starts and ends on the same connection.
type Store struct {
	db   *sql.DB
	path string // as given to Open
	dsn  string // path with the store's settings
	// check is the lease a tenure's transaction must still hold when it
	// commits, while one is open (see atCommit); vetoed is set by the
	// commit it refused.
	check atomic.Pointer[commitCheck]
	// tenures is the fence of the store's tenures (see Tenure).
	tenures *fence.Table
	vetoed  atomic.Pointer[commitCheck]
	sql     *prepared
	// files are the database file, its write-ahead log and its shared
	// memory index as they were opened; nil in memory. See files.go.
	files []openedFile
	// failed is set by the first commit whose outcome is unknown; from
	// then on the store refuses every operation (see transaction.go).
	failed atomic.Pointer[error]
	// changes wakes, in this process, those waiting for a lease to change.
	changes changes
	// watchInterval is how often a waiter looks for other processes'
	// changes.
	watchInterval time.Duration
}

// Open opens (creating if needed) the SQLite file at path in WAL mode with
// the default synchronous setting, and creates the authority's and the
// receivers' tables, each in a transaction of its own. A contending
// transaction waits up to cfg.BusyTimeout for another process's lock.
func Open(ctx context.Context, path string, cfg Config) (*Store, error) {
	busyTimeout := cfg.BusyTimeout
	if err := checkPath(path); err != nil {
		return nil, err
	}
	options := url.Values{}
	// IMMEDIATE takes the write lock at BEGIN, so a contending writer waits
	// on busy_timeout; a DEFERRED transaction that later upgrades to a write
	// fails with SQLITE_BUSY at once, whatever the timeout.
	options.Set("_txlock", "immediate")
	options.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds()))
	options.Add("_pragma", "journal_mode(WAL)")
	s := &Store{path: path, dsn: path + "?" + options.Encode(), watchInterval: cfg.WatchInterval}
	connector, err := sqlite.NewConnector(s.dsn)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	// Every connection the store opens checks a tenure's lease at each
	// commit (see atCommit).
	db := sql.OpenDB(hooked{Connector: connector, store: s})
	s.db = db
	if s.tenures, err = fence.New(db, fence.Options{Dialect: fence.SQLite, Table: tenuresTable}); err != nil {
		return nil, errors.Join(err, db.Close())
	}
	// One connection per process: database/sql cannot then run a
	// transaction's statements on two connections, the process holds at
	// most one SQLite lock at a time, and an in-memory database (which
	// is its connection) is never a second, empty one.
	db.SetMaxOpenConns(1)
	if s.watchInterval <= 0 {
		s.watchInterval = DefaultWatchInterval
	}
	if err := s.createTables(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("open %s: %w", path, err), db.Close())
	}
	if s.sql, err = prepare(ctx, db); err != nil {
		return nil, errors.Join(fmt.Errorf("open %s: %w", path, err), db.Close())
	}
	if path != memory {
		if s.files, err = identify(path); err != nil {
			return nil, errors.Join(fmt.Errorf("open %s: %w", path, err), s.Close())
		}
	}
	return s, nil
}

// Close releases the store's connection. What a later Open finds in the
// file is what the file holds, also after an unknown outcome.
func (s *Store) Close() error {
	return errors.Join(s.sql.close(), s.db.Close())
}

// Authority returns the lease authority backed by this store.
func (s *Store) Authority() *Authority {
	return &Authority{store: s}
}

// Receiver returns a receiver backed by this store, fenced or not. The
// two modes keep their records in tables of their own.
func (s *Store) Receiver(mode leases.Mode) *Receiver {
	return &Receiver{store: s, mode: mode}
}

// Guarded returns the guarded receiver backed by this store.
func (s *Store) Guarded() *GuardedReceiver {
	return &GuardedReceiver{store: s}
}

func (s *Store) createTables(ctx context.Context) error {
	// One transaction per table: even the schema never spans the
	// authority's and a receiver's tables.
	for _, ddl := range []string{authoritySchema, lineSchema, fencedSchema, unfencedSchema, guardedSchema, s.tenures.Schema()} {
		if err := s.inTransaction(ctx, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, ddl)
			return err
		}); err != nil {
			return fmt.Errorf("create tables: %w", err)
		}
	}
	return nil
}

// IntegrityCheck runs SQLite's PRAGMA integrity_check and returns what it
// says: "ok" for a sound file, otherwise the problems it found, one per
// line.
func (s *Store) IntegrityCheck(ctx context.Context) (string, error) {
	if err := s.usable(); err != nil {
		return "", fmt.Errorf("integrity check: %w", err)
	}
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
