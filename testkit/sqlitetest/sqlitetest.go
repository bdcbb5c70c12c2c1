// Package sqlitetest gives a test a SQLite store of its own: a file in the
// test's temporary directory, a store on it that is closed when the test
// ends, the file's rows as text read through a connection of its own (to
// show that an operation changed nothing), and the store as the contract
// (testkit/contract) sees it. The tests of the root package, of package
// sqlite and of the evidence's workers share it.
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
	"leases/sqlite"
	"leases/testkit/contract"
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

// Backend is a fresh SQLite store as the contract sees it; its state is
// every row of every table, read through a connection of its own.
func Backend(t *testing.T) contract.Backend {
	t.Helper()
	path := Path(t)
	s := Open(t, path)
	return contract.Backend{
		Authority: s.Authority(),
		Fenced:    s.Receiver(leases.Fenced),
		Unfenced:  s.Receiver(leases.Unfenced),
		Guarded:   s.Guarded(),
		Receiver:  s.Receiver,
		State:     func(t *testing.T) string { return Dump(t, path) },
	}
}

// OpenDirectly opens the store's file with the driver alone, as the store
// does: one connection, immediate transactions, a busy timeout.
func OpenDirectly(t testing.TB, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", fmt.Sprintf("%s?_txlock=immediate&_pragma=busy_timeout(%d)", path, sqlite.DefaultBusyTimeout.Milliseconds()))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	return db
}

// Dump renders every row of every table, through a connection of its
// own, so a test can show that an operation changed nothing.
func Dump(t testing.TB, path string) string {
	t.Helper()
	db := OpenDirectly(t, path)
	defer db.Close()
	var out strings.Builder
	for _, query := range []string{
		`SELECT resource, epoch, holder, granted_at, expires_at, last_tick FROM authority_leases ORDER BY resource`,
		`SELECT resource, epoch, value_epoch, value FROM receiver_records ORDER BY resource`,
		`SELECT resource, epoch, value FROM unfenced_records ORDER BY resource`,
		`SELECT resource, epoch, value_epoch, value FROM guarded_records ORDER BY resource`,
	} {
		rows, err := db.Query(query)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&out, "%q\n", vals)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			t.Fatal(err)
		}
	}
	return out.String()
}
