package leases_test

// Benchmarks of the library's operations on a file database in WAL mode,
// each next to its floor: the same driver and settings running a bare
// BEGIN IMMEDIATE, a one-row upsert and COMMIT. Every operation reports its
// ratio to the floor measured in the same run (x-floor). The same again in
// memory, where no fsync hides the library's own CPU cost.
//
//	go test -run '^$' -bench Operations -benchmem .

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"leases"
	"leases/internal/command"
	"leases/sqlite"
)

func BenchmarkOperations(b *testing.B) {
	for _, storage := range []string{"file", "memory"} {
		b.Run(storage, func(b *testing.B) { benchmarkOperations(b, storage == "memory") })
	}
}

func benchmarkOperations(b *testing.B, inMemory bool) {
	var floor float64 // ns/op of the bare transaction, measured first
	report := func(b *testing.B) {
		perOp := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		if floor > 0 {
			b.ReportMetric(perOp/floor, "x-floor")
		}
	}
	b.Run("floor: BEGIN IMMEDIATE, upsert, COMMIT", func(b *testing.B) {
		db := openBare(b, inMemory)
		upsert, err := db.Prepare(command.BareUpsert)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = upsert.Close() })
		for i := 0; b.Loop(); i++ {
			tx, err := db.BeginTx(context.Background(), nil)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := tx.Stmt(upsert).Exec("r", i); err != nil {
				b.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				b.Fatal(err)
			}
		}
		floor = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	})
	ctx := context.Background()
	b.Run("Acquire", func(b *testing.B) {
		auth := benchStore(b, inMemory).Authority()
		for i := int64(0); b.Loop(); i++ {
			if _, err := auth.Acquire(ctx, "r", "A", 2*i, 1); err != nil { // the last lease has expired
				b.Fatal(err)
			}
		}
		report(b)
	})
	b.Run("Renew", func(b *testing.B) {
		auth := benchStore(b, inMemory).Authority()
		lease, err := auth.Acquire(ctx, "r", "A", 0, 2)
		if err != nil {
			b.Fatal(err)
		}
		for i := int64(1); b.Loop(); i++ {
			if lease, err = auth.Renew(ctx, lease, i, 2); err != nil {
				b.Fatal(err)
			}
		}
		report(b)
	})
	b.Run("Release", func(b *testing.B) {
		auth := benchStore(b, inMemory).Authority()
		var spent time.Duration // the acquires that make each release possible
		for i := int64(0); b.Loop(); i++ {
			start := time.Now()
			lease, err := auth.Acquire(ctx, "r", "A", i, 5)
			spent += time.Since(start)
			if err != nil {
				b.Fatal(err)
			}
			if err := auth.Release(ctx, lease, i); err != nil {
				b.Fatal(err)
			}
		}
		if floor > 0 {
			perOp := float64((b.Elapsed() - spent).Nanoseconds()) / float64(b.N)
			b.ReportMetric(perOp, "release-ns/op")
			b.ReportMetric(perOp/floor, "x-floor")
		}
	})
	for _, mode := range []leases.Mode{leases.Fenced, leases.Unfenced} {
		b.Run("Write "+string(mode), func(b *testing.B) {
			recv := benchStore(b, inMemory).Receiver(mode)
			for i := int64(1); b.Loop(); i++ {
				if _, err := recv.Write(ctx, "r", i, "value"); err != nil { // a higher epoch each time: accepted
					b.Fatal(err)
				}
			}
			report(b)
		})
	}
}

func benchStore(b *testing.B, inMemory bool) *sqlite.Store {
	b.Helper()
	path := ":memory:"
	if !inMemory {
		path = filepath.Join(b.TempDir(), "bench.db")
	}
	store, err := sqlite.Open(context.Background(), path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = store.Close() })
	return store
}

// openBare opens the floor's database: the store's settings, one table.
func openBare(b *testing.B, inMemory bool) *sql.DB {
	b.Helper()
	path := ":memory:"
	if !inMemory {
		path = filepath.Join(b.TempDir(), "bare.db")
	}
	db, err := command.OpenBareDB(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	return db
}
