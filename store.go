package leases

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

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
	db  *sql.DB
	sql *prepared
}

// Open opens (creating if needed) the SQLite file at path in WAL mode with
// the default synchronous setting, and creates the authority's and the
// receiver's tables, each in a transaction of its own.
func Open(ctx context.Context, path string) (*Store, error) {
	return open(ctx, path, DefaultBusyTimeout)
}

func open(ctx context.Context, path string, busyTimeout time.Duration) (*Store, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: database path is empty", ErrInvalidInput)
	}
	// The driver splits the DSN at the first '?', so such a path would be
	// read as options; refuse it rather than open some other file.
	if strings.ContainsAny(path, "?\x00") {
		return nil, fmt.Errorf("%w: database path %q contains '?' or NUL", ErrInvalidInput, path)
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
	s := &Store{db: db}
	if err := s.createTables(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("open %s: %w", path, err), db.Close())
	}
	if s.sql, err = prepare(ctx, db); err != nil {
		return nil, errors.Join(fmt.Errorf("open %s: %w", path, err), db.Close())
	}
	return s, nil
}

// Close releases the store's connection.
func (s *Store) Close() error {
	return errors.Join(s.sql.close(), s.db.Close())
}

// Authority returns the lease authority backed by this store.
func (s *Store) Authority() *Authority {
	return &Authority{db: s.db, sql: s.sql}
}

// Receiver returns a receiver backed by this store, fenced or not.
func (s *Store) Receiver(mode Mode) *Receiver {
	return &Receiver{db: s.db, sql: s.sql, mode: mode}
}

func (s *Store) createTables(ctx context.Context) error {
	// Two transactions, not one: even the schema never spans the
	// authority's and the receiver's tables.
	for _, ddl := range []string{authoritySchema, receiverSchema} {
		if err := inTransaction(ctx, s.db, func(tx *sql.Tx) error {
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
func inTransaction(ctx context.Context, db *sql.DB, fn func(*sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(tx); err != nil {
		return errors.Join(err, ignoreDone(tx.Rollback()))
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

func ignoreDone(err error) error {
	if errors.Is(err, sql.ErrTxDone) {
		return nil
	}
	return err
}
