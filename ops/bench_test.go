package ops_test

// A new operation through the record (ops.Do, and an HTTP request through
// httpfence.Handler) next to its floor, the same row inserted in a bare
// transaction, on a SQLite file in WAL mode and in memory:
//
//	go test -run '^$' -bench Record ./ops

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	"leases/fence"
	"leases/sqlite"
	"leases/testkit/fencetest"
	"leases/testkit/opstest"
)

func BenchmarkRecord(b *testing.B) {
	open := func(b *testing.B, path string) fencetest.DB {
		db, err := sql.Open("sqlite", fmt.Sprintf("%s?_txlock=immediate&_pragma=busy_timeout(%d)&_pragma=journal_mode(WAL)",
			path, sqlite.DefaultBusyTimeout.Milliseconds()))
		if err != nil {
			b.Fatal(err)
		}
		db.SetMaxOpenConns(1)
		b.Cleanup(func() { _ = db.Close() })
		return fencetest.DB{DB: db, Dialect: fence.SQLite}
	}
	b.Run("file", func(b *testing.B) { opstest.Benchmark(b, open(b, filepath.Join(b.TempDir(), "app.db"))) })
	b.Run("memory", func(b *testing.B) { opstest.Benchmark(b, open(b, ":memory:")) })
}
