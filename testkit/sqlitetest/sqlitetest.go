// Package sqlitetest gives a test a SQLite store of its own: a file in the
// test's temporary directory, a store on it that is closed when the test
// ends, the file's rows as text read through a connection of its own (to
// show that an operation changed nothing), and the store as the
// contract's suite (package leases/leasestest) sees it. The tests of the
// root package, of package sqlite and of the evidence's workers share it.
//
// A test kit: used by tests only, never by shipped code (the library, the
// evidence as cmd/run-experiment links it, the commands).
package sqlitetest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"leases"
	"leases/clock"
	"leases/leasestest"
	"leases/sqlite"
)

// Path is a fresh database file's path in t's temporary directory.
func Path(t testing.TB) string {
	t.Helper()
	return filepath.Join(t.TempDir(), "leases.db")
}

// Open opens a store on path, closed when t ends.
func Open(t testing.TB, path string) *sqlite.Store {
	t.Helper()
	store, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	t.Cleanup(func() { _ = store.Close() })
	return store
}

// Backend is a fresh SQLite store as the contract's suite sees it: its
// lessor on a manual host clock, which Expire advances; its guard the
// store's own Tenure, whose business rows Work inserts into a table of
// the file; its state every row of every table, read through a
// connection of its own.
func Backend(t *testing.T) leasestest.Backend {
	t.Helper()
	path := Path(t)
	host := clock.NewManual(1_000)
	s, err := sqlite.Options{Clock: host}.Open(t.Context(), path)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Tx(t.Context(), func(tx *sql.Tx) error {
		_, err := tx.Exec(`CREATE TABLE work (resource TEXT, epoch INTEGER)`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return leasestest.Backend{
		Authority:       s.Authority(),
		State:           func(ctx context.Context) (string, error) { return withoutLine(DumpContext(ctx, path)) },
		Fenced:          s.Receiver(leases.Fenced),
		Unfenced:        s.Receiver(leases.Unfenced),
		Guarded:         s.Guarded(),
		Lessor:          s.Lessor(),
		Expire:          func(_ context.Context, l leases.Lease) error { return host.Advance(max(host.Now(), l.ExpiresAt)) },
		Guard:           s,
		GuardChecksLive: true,
		Work: func(ctx context.Context, tx *sql.Tx, l leases.Lease) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO work VALUES (?, ?)`, l.Resource, l.Epoch)
			return err
		},
	}
}

// OpenDirectly opens the store's file with the driver alone, as the store
// does: one connection, immediate transactions, a busy timeout.
func OpenDirectly(t testing.TB, path string) *sql.DB {
	t.Helper()
	db, err := openDirectly(path)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func openDirectly(path string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", fmt.Sprintf("%s?_txlock=immediate&_pragma=busy_timeout(%d)", path, sqlite.DefaultBusyTimeout.Milliseconds()))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

// Dump renders every row of every table, through a connection of its
// own, so a test can show that an operation changed nothing.
func Dump(t testing.TB, path string) string {
	t.Helper()
	out, err := DumpContext(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// DumpContext is Dump's rendering, or why it failed: a
// leasestest.Backend's State.
func DumpContext(ctx context.Context, path string) (string, error) {
	db, err := openDirectly(path)
	if err != nil {
		return "", err
	}
	defer db.Close()
	return Rows(ctx, db)
}

// Rows renders every row of every table of db, each table's in the order
// of its first column.
func Rows(ctx context.Context, db *sql.DB) (string, error) {
	var tables []string
	if err := each(ctx, db, `SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name`, func(row []any) {
		tables = append(tables, fmt.Sprint(row[0]))
	}); err != nil {
		return "", err
	}
	var out strings.Builder
	for _, table := range tables {
		if err := each(ctx, db, fmt.Sprintf(`SELECT * FROM %q ORDER BY 1`, table), func(row []any) {
			fmt.Fprintf(&out, "%s %q\n", table, row)
		}); err != nil {
			return "", err
		}
	}
	return out.String(), nil
}

// each calls fn with every row of query, its columns' values.
func each(ctx context.Context, db *sql.DB, query string, fn func(row []any)) error {
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		return fmt.Errorf("%s: %w", query, err)
	}
	cols, err := rows.Columns()
	for err == nil && rows.Next() {
		vals, ptrs := make([]any, len(cols)), make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err = rows.Scan(ptrs...); err == nil {
			fn(vals)
		}
	}
	return errors.Join(err, rows.Err(), rows.Close())
}

// withoutLine leaves the Lessor's waiting line (table authority_line) out
// of a dump: a refused Acquire takes its place there, which changes no
// lease (leasestest.Backend.State).
func withoutLine(dump string, err error) (string, error) {
	var kept []string
	for _, line := range strings.SplitAfter(dump, "\n") {
		if !strings.HasPrefix(line, "authority_line ") {
			kept = append(kept, line)
		}
	}
	return strings.Join(kept, ""), err
}
