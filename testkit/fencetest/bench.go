package fencetest

import (
	"database/sql"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"leases"
)

// Benchmark measures one transaction with the fence's Write in it next
// to its floor, the same transaction with a bare one-row upsert of the
// same columns instead. The two alternate in one loop, so that both see
// the same machine: on a shared one, floors measured a second apart
// differed several times over. The fence's statements handed to the
// driver as text are held to the upsert as text, the prepared ones to the
// prepared upsert. Each case reports both times per transaction and
// their ratio (x-floor). An accepted Write runs one statement, a stale
// one two (the upsert, then the read of the row that rejected it).
func Benchmark(b *testing.B, db DB) {
	ctx := Context(b)
	table := Setup(b, db, "bench")
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS bench_bare (
		resource TEXT NOT NULL PRIMARY KEY, epoch BIGINT NOT NULL, value_epoch BIGINT, value TEXT)`); err != nil {
		b.Fatal(err)
	}
	upsert := db.SQL(`INSERT INTO bench_bare (resource, epoch, value_epoch, value) VALUES ($1, $2, $2, $3)
		ON CONFLICT (resource) DO UPDATE SET epoch = excluded.epoch, value_epoch = excluded.value_epoch, value = excluded.value`)
	prepared, err := db.PrepareContext(ctx, upsert)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = prepared.Close() })
	floors := map[string]func(tx *sql.Tx, i int64) error{
		"text": func(tx *sql.Tx, i int64) error {
			_, err := tx.ExecContext(ctx, upsert, "r", i, "value")
			return err
		},
		"prepared": func(tx *sql.Tx, i int64) error {
			_, err := tx.StmtContext(ctx, prepared).ExecContext(ctx, "r", i, "value")
			return err
		},
	}
	for _, face := range faces(b, db, table) {
		for _, c := range []struct {
			name  string
			epoch func(i int64) int64
			want  leases.Outcome
		}{
			{"Write accepted", func(i int64) int64 { return i + 2 }, leases.Accepted},
			{"Write stale", func(int64) int64 { return 1 }, leases.Stale},
		} {
			b.Run(face.name+"/"+c.name, func(b *testing.B) {
				resource := fmt.Sprintf("%s #%d", b.Name(), runs.Add(1)) // -count runs it again
				commit(b, db, func(tx *sql.Tx) {                         // the fence at 2: epoch 1 is stale, 3 and up accepted
					if _, err := face.via.Write(ctx, tx, resource, 2, "value"); err != nil {
						b.Fatal(err)
					}
				})
				var floor, fence time.Duration
				for i := int64(1); b.Loop(); i++ {
					floor += timed(b, db, func(tx *sql.Tx) error { return floors[face.name](tx, i) })
					fence += timed(b, db, func(tx *sql.Tx) error {
						result, err := face.via.Write(ctx, tx, resource, c.epoch(i), "value")
						if err == nil && result.Outcome != c.want {
							b.Fatalf("%+v; want %s", result, c.want)
						}
						return err
					})
				}
				b.ReportMetric(float64(floor.Nanoseconds())/float64(b.N), "floor-ns/tx")
				b.ReportMetric(float64(fence.Nanoseconds())/float64(b.N), "fence-ns/tx")
				b.ReportMetric(float64(fence)/float64(floor), "x-floor")
			})
		}
	}
}

// runs counts the benchmark's runs, so that each starts on a row of its
// own.
var runs atomic.Int64

// timed runs fn in a transaction of its own, committed, and returns how
// long the transaction took from BEGIN to the end of COMMIT.
func timed(b *testing.B, db DB, fn func(tx *sql.Tx) error) time.Duration {
	start := time.Now()
	commit(b, db, func(tx *sql.Tx) {
		if err := fn(tx); err != nil {
			b.Fatal(err)
		}
	})
	return time.Since(start)
}
