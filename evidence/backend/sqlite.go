package backend

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"leases"
	"leases/internal/rules"
	"leases/internal/sqlitestore"
	"leases/sqlite"
)

// SQLite is the SQLite backend for the evidence: each scenario's sandbox
// is a fresh file in a temporary directory of its own, which every worker
// opens by path (its Address); the explorer's store lives in memory.
type SQLite struct{}

// Name implements Driver.
func (SQLite) Name() string { return "sqlite" }

// Open implements Driver: address is the database file's path.
func (SQLite) Open(ctx context.Context, address string) (Store, error) {
	s, err := sqlite.Open(ctx, address)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Start implements Driver; SQLite needs nothing started.
func (SQLite) Start(context.Context, string) (Deployment, error) { return sqliteRun{}, nil }

type sqliteRun struct{}

func (sqliteRun) Close() error { return nil }

// NewSandbox makes a temporary directory for the scenario and names a file
// in it; SQLite creates the file when the controller first opens it.
func (sqliteRun) NewSandbox(_ context.Context, scenario string) (Sandbox, error) {
	dir, err := os.MkdirTemp("", "leases-"+scenario+"-")
	if err != nil {
		return nil, err
	}
	return sqliteSandbox{dir: dir, path: filepath.Join(dir, "shared.db")}, nil
}

// Rewindable opens an in-memory store: no file, no fsync, so that the
// explorer's thousands of steps measure the code and not the disk.
func (sqliteRun) Rewindable(ctx context.Context) (Rewindable, error) {
	s, err := sqlitestore.Open(ctx, ":memory:", sqlitestore.Config{BusyTimeout: sqlitestore.DefaultBusyTimeout})
	if err != nil {
		return nil, err
	}
	return sqliteExplorable{s}, nil
}

type sqliteSandbox struct{ dir, path string }

func (p sqliteSandbox) Address() string { return p.path }

// Close removes the database's files by name and then the empty
// directory: unlink and rmdir need no open file, so a process out of file
// descriptors, or whose opens fail, still cleans up. Anything else in the
// directory is removed with os.RemoveAll, twice if need be, since what
// stopped the first try may have passed. A directory left behind is named.
func (p sqliteSandbox) Close() error {
	for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
		_ = os.Remove(p.path + suffix)
	}
	if os.Remove(p.dir) == nil {
		return nil
	}
	err := os.RemoveAll(p.dir)
	if err != nil {
		err = os.RemoveAll(p.dir)
	}
	if err != nil {
		return fmt.Errorf("cannot remove its temporary directory %s: %w", p.dir, err)
	}
	return nil
}

// sqliteExplorable gives the implementation's concrete types the
// interfaces' faces.
type sqliteExplorable struct{ s *sqlitestore.Store }

func (e sqliteExplorable) Authority() leases.Authority               { return e.s.Authority() }
func (e sqliteExplorable) Receiver(mode leases.Mode) leases.Receiver { return e.s.Receiver(mode) }
func (e sqliteExplorable) Guarded() leases.GuardedReceiver           { return e.s.Guarded() }
func (e sqliteExplorable) Close() error                              { return e.s.Close() }
func (e sqliteExplorable) Snapshot(ctx context.Context) ([]byte, error) {
	return e.s.Snapshot(ctx)
}
func (e sqliteExplorable) Restore(ctx context.Context, snapshot []byte) error {
	return e.s.Restore(ctx, snapshot)
}

// UserDB implements UserTransactions: the store's one connection.
func (e sqliteExplorable) UserDB() *sql.DB { return e.s.DB() }

// LiveIn implements UserTransactions.
func (e sqliteExplorable) LiveIn(ctx context.Context, tx *sql.Tx, held leases.Lease, now int64) (bool, error) {
	return e.s.Authority().LiveIn(ctx, tx, held, rules.At(now))
}

// Floors implements Floored: a bare transaction (BEGIN IMMEDIATE, one
// statement, COMMIT) with the store's settings, on a file in WAL mode for
// the scenarios' writes and reads, in memory for the explorer's steps.
func (SQLite) Floors(ctx context.Context) (Floors, error) {
	f := Floors{OpenWrites: 2, OpenReads: 2}
	dir, err := os.MkdirTemp("", "leases-floors-")
	if err != nil {
		return f, err
	}
	defer os.RemoveAll(dir)
	file, err := sqlitestore.OpenFloor(filepath.Join(dir, "floor.db"))
	if err != nil {
		return f, err
	}
	defer file.Close()
	memory, err := sqlitestore.OpenFloor(":memory:")
	if err != nil {
		return f, err
	}
	defer memory.Close()
	i := 0
	upsert := func(db *sql.DB) func() error {
		return func() error {
			i++
			return sqlitestore.FloorTransaction(ctx, db, func(tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, sqlitestore.FloorUpsert, "k", i)
				return err
			})
		}
	}
	read := func() error {
		return sqlitestore.FloorTransaction(ctx, file, func(tx *sql.Tx) error {
			var v int
			return tx.QueryRowContext(ctx, sqlitestore.FloorRead, "k").Scan(&v)
		})
	}
	if f.Write, err = Average(64, upsert(file)); err != nil {
		return f, err
	}
	if f.Read, err = Average(64, read); err != nil {
		return f, err
	}
	f.Step, err = Average(2000, upsert(memory))
	return f, err
}

// Average is the mean time of n calls of fn.
func Average(n int, fn func() error) (time.Duration, error) {
	start := time.Now()
	for range n {
		if err := fn(); err != nil {
			return 0, err
		}
	}
	return time.Since(start) / time.Duration(n), nil
}
