package fence_test

// The fence's Write in a transaction next to its floor, the same
// transaction with a bare one-row upsert, on a SQLite file in WAL mode
// and, where no fsync hides the fence's own cost, in memory:
//
//	go test -run '^$' -bench Write ./fence

import (
	"path/filepath"
	"testing"

	"leases/testkit/fencetest"
)

func BenchmarkWrite(b *testing.B) {
	b.Run("file", func(b *testing.B) {
		fencetest.Benchmark(b, openSQLite(b, filepath.Join(b.TempDir(), "app.db"), "immediate"))
	})
	b.Run("memory", func(b *testing.B) { fencetest.Benchmark(b, openSQLite(b, ":memory:", "immediate")) })
}
