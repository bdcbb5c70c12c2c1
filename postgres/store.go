package postgres

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"leases"
	"leases/fence"
	"leases/internal/batch"
	"leases/internal/rules"
)

// DefaultPrefix is the prefix of a store's table names when its Options
// leave it empty: the tables are leases_authority, leases_fenced,
// leases_unfenced and leases_guarded.
const DefaultPrefix = "leases_"

// DefaultRetries is how many times a store tries a decision again after
// a serialization failure or a deadlock, when its Options leave Retries
// zero.
const DefaultRetries = 10

// DefaultWatchInterval is how often a waiter looks at a resource's row
// (see Changed), when the Options leave WatchInterval zero.
const DefaultWatchInterval = 20 * time.Millisecond

// Options tune a Store; the zero value is the default.
type Options struct {
	// Prefix is put in front of the store's table names (authority,
	// fenced, unfenced, guarded); DefaultPrefix when empty. It must make
	// plain identifiers: lower-case ASCII letters, digits and
	// underscores, not starting with a digit, the longest name at most
	// 63 bytes. Stores with the same prefix in the same database share
	// their leases and records.
	Prefix string
	// Isolation is the isolation level of the store's own transactions:
	// sql.LevelDefault (the zero value: the server's
	// default_transaction_isolation, READ COMMITTED unless set
	// otherwise), sql.LevelReadCommitted, sql.LevelRepeatableRead or
	// sql.LevelSerializable. The store is correct under each.
	Isolation sql.IsolationLevel
	// Retries bounds how many times a decision is tried again, inside the
	// call, after PostgreSQL refused to commit it as it stood
	// (serialization failure, SQLSTATE 40001, which REPEATABLE READ and
	// SERIALIZABLE answer under contention; deadlock, 40P01). Such a
	// transaction committed nothing, so trying again is safe. Zero means
	// DefaultRetries; negative means never. When they run out, the call
	// returns the last failure: a failure before commit.
	Retries int
	// WatchInterval is how often a waiting acquire (session.Wait) reads
	// the row of the resource it waits for, to learn of a release before
	// the lease's expiry. Zero means DefaultWatchInterval.
	WatchInterval time.Duration
}

// Store is a handle on the leases and records kept in one PostgreSQL
// database under one prefix. It holds no connection of its own: every
// call takes one from the *sql.DB for its transaction. Safe for
// concurrent use.
//
// Unlike the SQLite store, a Store goes on after an outcome it could not
// learn (leases.ErrOutcomeUnknown): every decision is made on what the
// server holds when its transaction runs, never on anything this process
// remembers.
type Store struct {
	db            *sql.DB
	names         tableNames
	sql           statements
	lines         lineStatements
	fenced        *fence.Table // the fenced receiver's records
	guarded       *fence.Table // the guarded receiver's records
	tenures       *fence.Table // the fence of the store's tenures (Tenure)
	isolation     sql.IsolationLevel
	retries       int
	watchInterval time.Duration
	renewals      *batch.Group[renewal, renewedLease] // the Lessor's renewals, in batches (renewals.go)
	listener      *listener                           // the Lessor's waiters' LISTEN
}

// tableNames are a store's tables.
type tableNames struct {
	authority, fenced, unfenced, guarded string
	// tenures is the fence of the store's tenures, and live the
	// function and the trigger that check a tenure's lease at commit.
	tenures, live string
	// line is the Lessor's lines of waiters (see line.go).
	line string
}

// New returns a store on db, which the caller opens with the driver of
// its choice (pgx's stdlib, lib/pq) and closes after the last call. New
// itself talks to nobody: call Create once, at setup, to make the tables.
// Options that make no sense are refused with leases.ErrInvalidInput.
func New(db *sql.DB, opts Options) (*Store, error) {
	prefix := opts.Prefix
	if prefix == "" {
		prefix = DefaultPrefix
	}
	names := tableNames{
		authority: prefix + "authority", fenced: prefix + "fenced",
		unfenced: prefix + "unfenced", guarded: prefix + "guarded",
		tenures: prefix + "fence", live: prefix + "live", line: prefix + "line",
	}
	// The longest name decides whether the prefix fits.
	if err := rules.CheckTableName("postgres store: table name", names.authority); err != nil {
		return nil, err
	}
	switch opts.Isolation {
	case sql.LevelDefault, sql.LevelReadCommitted, sql.LevelRepeatableRead, sql.LevelSerializable:
	default:
		return nil, fmt.Errorf("%w: postgres store: isolation %v is none of the default, read committed, repeatable read or serializable",
			leases.ErrInvalidInput, opts.Isolation)
	}
	if opts.WatchInterval < 0 {
		return nil, fmt.Errorf("%w: postgres store: WatchInterval %v is negative", leases.ErrInvalidInput, opts.WatchInterval)
	}
	s := &Store{
		db: db, names: names, sql: newStatements(names), lines: newLineStatements(names.line),
		isolation: opts.Isolation, retries: opts.Retries, watchInterval: opts.WatchInterval,
	}
	s.listener = &listener{store: s}
	switch {
	case s.retries == 0:
		s.retries = DefaultRetries
	case s.retries < 0:
		s.retries = 0
	}
	if s.watchInterval == 0 {
		s.watchInterval = DefaultWatchInterval
	}
	s.renewals = newRenewals(s)
	var err error
	if s.fenced, err = fence.New(db, fence.Options{Dialect: fence.PostgreSQL, Table: names.fenced}); err != nil {
		return nil, err
	}
	if s.guarded, err = fence.New(db, fence.Options{Dialect: fence.PostgreSQL, Table: names.guarded}); err != nil {
		return nil, err
	}
	if s.tenures, err = fence.New(db, fence.Options{Dialect: fence.PostgreSQL, Table: names.tenures}); err != nil {
		return nil, err
	}
	return s, nil
}

// Create creates the store's tables where they do not exist yet, each in
// a statement of its own. Call it once, at setup, and not from the
// transactions that use the store (as for fence.Table.Create). It does
// not check existing tables of those names.
func (s *Store) Create(ctx context.Context) error {
	for _, ddl := range s.schema() {
		if _, err := s.db.ExecContext(ctx, ddl); err != nil {
			return fmt.Errorf("postgres store: create tables: %w", err)
		}
	}
	return nil
}

// Schema returns the CREATE TABLE IF NOT EXISTS statements that Create
// runs, separated by semicolons, for those who keep their schema in
// migrations.
func (s *Store) Schema() string { return strings.Join(s.schema(), ";\n") + ";\n" }

func (s *Store) schema() []string {
	return []string{s.sql.authoritySchema, s.fenced.Schema(), s.sql.unfencedSchema, s.guarded.Schema(),
		s.tenures.Schema(), s.sql.liveFunction, s.sql.liveTrigger, s.lines.schema}
}

// Authority returns the lease authority kept in this store, with the
// explicit ticks of leases.Authority: the caller says what time it is.
// It is the contract's model; a service uses Lessor.
func (s *Store) Authority() *Authority { return &Authority{store: s} }

// Lessor returns the lease authority kept in this store on the server's
// clock: no caller says what time it is. Each decision reads the server's
// clock_timestamp(), in milliseconds since the Unix epoch, inside its
// transaction and after it has locked the resource's row, never earlier
// than the row's last change; the leases' ticks are the server's
// (leases.ServerMillis).
func (s *Store) Lessor() leases.Lessor { return &lessor{store: s} }

// Receiver returns a receiver kept in this store, fenced or not. The two
// modes keep their records in tables of their own; the fenced one is a
// fence table of package fence.
func (s *Store) Receiver(mode leases.Mode) leases.Receiver { return &receiver{store: s, mode: mode} }

// Guarded returns the guarded receiver kept in this store, on explicit
// ticks: a write is accepted only while the writer's lease is the live
// one, checked in the write's own transaction.
func (s *Store) Guarded() leases.GuardedReceiver { return &guardedReceiver{store: s} }
