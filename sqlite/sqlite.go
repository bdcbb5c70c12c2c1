// Package sqlite is the SQLite backend of package leases: the authority
// and the receivers in one SQLite file, each operation a BEGIN IMMEDIATE
// transaction of its own, and no transaction spanning the authority's and
// a receiver's tables.
//
// The file is opened in WAL mode with SQLite's default synchronous setting
// and one connection per Store. Processes that open the same file share
// its leases and records; a contending transaction waits on the busy
// timeout rather than failing.
package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"leases"
	"leases/clock"
	"leases/fence"
	"leases/internal/sqlitestore"
)

// DefaultBusyTimeout is how long an operation waits for another process's
// write transaction on the same file before it fails. It bounds
// contention; it never orders anything.
const DefaultBusyTimeout = sqlitestore.DefaultBusyTimeout

// Errors of a store that can answer nothing more; both match
// leases.ErrStoreUnusable.
var (
	// ErrDatabaseMoved reports that the database file, its write-ahead
	// log or its index was deleted or replaced after the store opened
	// it. Nothing is changed: going on would write to a file nobody else
	// sees, and a process that opens the path afresh would start epochs
	// from 1 again.
	ErrDatabaseMoved = sqlitestore.ErrDatabaseMoved
	// ErrReopenRequired reports an operation refused because the store
	// saw an unknown outcome before (leases.ErrOutcomeUnknown). After a
	// failed commit, what this process would read may differ from what
	// the file holds (measured: the process still read the old value
	// while the next process read the new one), so the store answers
	// nothing more from that view: close it and open the file again.
	ErrReopenRequired = sqlitestore.ErrReopenRequired
)

// Store is one process's handle on a SQLite file that holds leases and
// receiver records. It owns a single connection, so every transaction
// starts and ends on the same connection.
type Store struct {
	store *sqlitestore.Store
	now   func() int64 // the host's clock, for the Lessor
}

// Options tune how a file is opened; the zero value is the default.
type Options struct {
	// BusyTimeout bounds how long an operation waits for another
	// process's write lock on the same file. Zero means
	// DefaultBusyTimeout; a negative value means fail at once.
	BusyTimeout time.Duration
	// Clock is the clock the Lessor decides on; nil means the machine's
	// wall clock (clock.Wall). Tests give it a manual one.
	Clock clock.Clock
	// WatchInterval is how often a waiting acquire (session.Wait) looks
	// whether another process released or renewed the lease it waits
	// for: SQLite cannot notify one process of another's commit, so a
	// waiter reads PRAGMA data_version, which is cheap and takes no
	// lock, at this interval. Zero means DefaultWatchInterval (10 ms).
	WatchInterval time.Duration
}

// DefaultWatchInterval is the WatchInterval of a zero Options.
const DefaultWatchInterval = sqlitestore.DefaultWatchInterval

// Open opens (creating if needed) the SQLite file at path with the
// default options. Path ":memory:" is a database of this store's own that
// lives as long as the store.
func Open(ctx context.Context, path string) (*Store, error) {
	return Options{}.Open(ctx, path)
}

// Open opens (creating if needed) the SQLite file at path with these
// options.
func (o Options) Open(ctx context.Context, path string) (*Store, error) {
	busy := o.BusyTimeout
	switch {
	case busy == 0:
		busy = DefaultBusyTimeout
	case busy < 0:
		busy = 0
	}
	if o.WatchInterval < 0 {
		return nil, fmt.Errorf("%w: sqlite options: WatchInterval %v is negative", leases.ErrInvalidInput, o.WatchInterval)
	}
	s, err := sqlitestore.Open(ctx, path, sqlitestore.Config{BusyTimeout: busy, WatchInterval: o.WatchInterval})
	if err != nil {
		return nil, err
	}
	clk := o.Clock
	if clk == nil {
		clk = clock.Wall{}
	}
	return &Store{store: s, now: clk.Now}, nil
}

// Authority returns the lease authority backed by this store, with
// explicit ticks: the caller says what time it is (see [leases.Authority]).
func (s *Store) Authority() leases.Authority { return s.store.Authority() }

// Lessor returns the lease authority on the host's clock, for sessions:
// each decision reads Options.Clock (the machine's wall clock) inside its
// transaction, once it holds the file's write lock, and never earlier than
// the lease's last change. Every process that shares the file is on the
// same machine and reads the same clock, so no caller's clock decides when
// a lease expires; a holder's session counts its own deadline on its own
// monotonic clock. What it assumes: the machine's clock is not stepped
// forward by more than a session's margin while a lease lives (NTP slews
// small corrections rather than stepping). Its leases' ticks are
// leases.HostMillis.
func (s *Store) Lessor() leases.Lessor { return s.store.Lessor(s.now) }

// Receiver returns a receiver backed by this store, fenced or not: the
// contract's model, which the evidence runs; a service guards its writes
// with Tenure.
func (s *Store) Receiver(mode leases.Mode) leases.Receiver { return s.store.Receiver(mode) }

// Guarded returns the guarded receiver backed by this store, the
// contract's model of a write accepted only while the writer's lease is
// the live one, checked in the write's own transaction; a service uses
// Tenure.
func (s *Store) Guarded() leases.GuardedReceiver { return s.store.Guarded() }

// Tx runs fn in a transaction of the store's file and commits it if fn
// succeeds: a BEGIN IMMEDIATE transaction on the store's one connection,
// for your own tables kept in the leases file: their schema, and what
// you read; a write that acts for a lease goes through a Tenure, which
// checks the lease. Its errors are those of every operation: a failure
// before commit, nothing committed; or an unknown outcome
// (leases.ErrOutcomeUnknown), after which the store refuses everything
// with ErrReopenRequired. A Tx holds the file's write lock from its
// beginning: keep it short, as every process waits for it.
func (s *Store) Tx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return s.store.UserTx(ctx, fn)
}

// Tenure begins the tenure of lease in the store's file, for your own
// transactions there: the guard of a team that keeps its rows in the
// leases file. Every transaction of the tenure ([fence.Tenure.Tx], run on
// the store's one connection) is admitted only while lease is the live
// lease on the host's clock (the Lessor's) and its epoch the newest the
// store's fence table has seen, and commits only if the lease is still
// live on that clock when SQLite commits it: a holder stopped between its
// statements and its COMMIT commits nothing after its lease's expiry. The
// transaction holds the file's write lock from its beginning, so no grant
// can come between the checks and the commit. It returns an error
// matching leases.ErrNotLive when lease is not live, and
// leases.ErrStale when a newer epoch reached the fence first. Begin
// it right after the lease was granted, with the session's context, and
// pass that context to every Tx.
//
// The check at the commit is SQLite's commit hook, on this process's
// clock: what remains is the instant between that check and SQLite's
// write of the commit to its log. A stopped process keeps the file's
// write lock, and so holds back every other process, for as long as it
// is stopped; keep the transactions short (docs/service.md).
//
// The errors are those of every operation of the store: after an unknown
// outcome (leases.ErrOutcomeUnknown) the store refuses everything with
// ErrReopenRequired, but the tenure's Resolve reads the file on a
// connection of its own.
func (s *Store) Tenure(ctx context.Context, lease leases.Lease) (*fence.Tenure, error) {
	t, err := s.store.Tenure(ctx, lease, s.now)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	return t, nil
}

// IntegrityCheck runs SQLite's PRAGMA integrity_check and returns what it
// says: "ok" for a sound file, otherwise the problems it found, one per
// line.
func (s *Store) IntegrityCheck(ctx context.Context) (string, error) {
	return s.store.IntegrityCheck(ctx)
}

// Close releases the store's connection.
func (s *Store) Close() error { return s.store.Close() }
