package sqlite_test

// Benchmarks of the SQLite backend's operations, on a file in WAL mode and
// in memory, each next to its floor: the same driver and settings running
// a bare BEGIN IMMEDIATE, a one-row upsert and COMMIT on a database of its
// own. Each operation and its floor are timed call by call, in
// alternation, so that a loaded machine weighs on both alike; each reports
// both means and their ratio (x-floor). In memory, no fsync hides the
// library's own CPU cost.
//
//	go test -run '^$' -bench Operations -count 5 ./sqlite/

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"leases"
	"leases/internal/sqlitestore"
	"leases/sqlite"
)

func BenchmarkOperations(b *testing.B) {
	ctx := context.Background()
	for _, storage := range []string{"file", "memory"} {
		b.Run(storage, func(b *testing.B) {
			inMemory := storage == "memory"
			operations := []struct {
				name string
				// prepare sets up a fresh store and returns the operation,
				// called with i = 1, 2, ...
				prepare func(b *testing.B, s *sqlite.Store) func(i int64) error
			}{
				{"Acquire", func(b *testing.B, s *sqlite.Store) func(int64) error {
					auth := s.Authority()
					return func(i int64) error { // the last lease has expired
						_, err := auth.Acquire(ctx, "r", "A", 2*i, 1)
						return err
					}
				}},
				{"Renew", func(b *testing.B, s *sqlite.Store) func(int64) error {
					auth := s.Authority()
					lease, err := auth.Acquire(ctx, "r", "A", 0, 2)
					if err != nil {
						b.Fatal(err)
					}
					return func(i int64) error {
						lease, err = auth.Renew(ctx, lease, i, 2)
						return err
					}
				}},
				{"Release", func(b *testing.B, s *sqlite.Store) func(int64) error {
					auth := s.Authority()
					return func(i int64) error {
						// Each release needs its acquire; both are timed.
						lease, err := auth.Acquire(ctx, "r", "A", i, 5)
						if err == nil {
							err = auth.Release(ctx, lease, i)
						}
						return err
					}
				}},
				{"Write fenced", func(b *testing.B, s *sqlite.Store) func(int64) error {
					recv := s.Receiver(leases.Fenced)
					return func(i int64) error { // a higher epoch each time: accepted
						_, err := recv.Write(ctx, "r", i, "value")
						return err
					}
				}},
				{"Write unfenced", func(b *testing.B, s *sqlite.Store) func(int64) error {
					recv := s.Receiver(leases.Unfenced)
					return func(i int64) error {
						_, err := recv.Write(ctx, "r", i, "value")
						return err
					}
				}},
			}
			for _, op := range operations {
				b.Run(op.name, func(b *testing.B) {
					floor := bareUpsert(b, inMemory)
					do := op.prepare(b, benchStore(b, inMemory))
					var floorTime, opTime time.Duration
					for i := int64(1); b.Loop(); i++ {
						start := time.Now()
						if err := floor(i); err != nil {
							b.Fatal(err)
						}
						floorTime += time.Since(start)
						start = time.Now()
						if err := do(i); err != nil {
							b.Fatal(err)
						}
						opTime += time.Since(start)
					}
					b.ReportMetric(float64(floorTime.Nanoseconds())/float64(b.N), "floor-ns/op")
					b.ReportMetric(float64(opTime.Nanoseconds())/float64(b.N), "op-ns/op")
					b.ReportMetric(float64(opTime)/float64(floorTime), "x-floor")
				})
			}
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

// bareUpsert is the floor: BEGIN IMMEDIATE, a prepared one-row upsert and
// COMMIT, on a database of its own with the store's settings.
func bareUpsert(b *testing.B, inMemory bool) func(i int64) error {
	b.Helper()
	path := ":memory:"
	if !inMemory {
		path = filepath.Join(b.TempDir(), "bare.db")
	}
	db, err := sqlitestore.OpenFloor(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	upsert, err := db.Prepare(sqlitestore.FloorUpsert)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = upsert.Close() })
	ctx := context.Background()
	return func(i int64) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if _, err := tx.Stmt(upsert).Exec("r", i); err != nil {
			return errors.Join(err, tx.Rollback())
		}
		return tx.Commit()
	}
}
