package postgres_test

// The authority's decisions next to their floors, timed transaction by
// transaction in alternation (as fencetest.Benchmark does), over a
// server's unix socket, one connection, on the tests' server (fsync=off)
// and on one that flushes every commit (fsync=on):
//
//	go test -run '^$' -bench 'Acquire|Guarded' -count 3 ./postgres/
//
// An Acquire (explicit ticks, and on the server's clock) next to a bare
// conditional upsert of a row of the same shape in one transaction, and,
// for what the shape of the transaction costs, the same transaction
// written by hand (a locking read, then an update) next to it; a
// transaction of a store's tenure (the lease checked live, the fence
// admitted, a business row, the lease checked again at the commit) next
// to the fenced transaction it extends (fence's Admit, then the same
// row).

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"leases"
	"leases/fence"
	"leases/postgres"
	"leases/postgres/pgtest"
	"leases/testkit/fencetest"
)

func BenchmarkAcquire(b *testing.B) {
	onServers(b, benchmarkAcquire)
}

func BenchmarkGuardedTransaction(b *testing.B) {
	onServers(b, benchmarkGuardedTransaction)
}

// onServers runs bench on the tests' server, which does not flush
// (fsync=off), where round trips and the server's CPU show, and on one
// that flushes every commit as a production server does.
func onServers(b *testing.B, bench func(b *testing.B, db fencetest.DB)) {
	b.Run("fsync=off", func(b *testing.B) { bench(b, database(b, 1)) })
	b.Run("fsync=on", func(b *testing.B) {
		bench(b, fencetest.DB{DB: pgtest.Open(b, pgtest.New(b, "fsync=on"), 1), Dialect: fence.PostgreSQL})
	})
}

func benchmarkAcquire(b *testing.B, db fencetest.DB) {
	ctx := fencetest.Context(b)
	store := newStore(b, db.DB, postgres.Options{})
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS bench_floor (
		resource text NOT NULL PRIMARY KEY, epoch bigint NOT NULL, holder text,
		granted_at bigint NOT NULL, expires_at bigint NOT NULL, last_tick bigint NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	// The floor: one statement that grants where the stored lease has
	// expired, in a transaction of its own.
	floor := func(resource string, i int64) error {
		return commit(ctx, db.DB, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO bench_floor AS stored VALUES ($1, 1, 'A', $2::bigint, $2::bigint + 1, $2::bigint)
				ON CONFLICT (resource) DO UPDATE SET epoch = stored.epoch + 1, holder = excluded.holder,
				granted_at = excluded.granted_at, expires_at = excluded.expires_at, last_tick = excluded.last_tick
				WHERE stored.expires_at <= excluded.granted_at`, resource, i)
			return err
		})
	}
	for _, c := range []struct {
		name    string
		acquire func(resource string, i int64) (leases.Lease, error)
		after   func(leases.Lease) error // untimed, before the next acquire
	}{
		// What the authority's transaction is, written by hand with no
		// decision in it: a locking read, then the write.
		{"locked read then write", func(resource string, i int64) (leases.Lease, error) {
			return leases.Lease{}, commit(ctx, db.DB, func(tx *sql.Tx) error {
				var epoch int64
				err := tx.QueryRowContext(ctx, `SELECT epoch FROM bench_floor WHERE resource = $1 FOR UPDATE`, resource).Scan(&epoch)
				if err == nil {
					_, err = tx.ExecContext(ctx, `UPDATE bench_floor SET epoch = $2, granted_at = $3::bigint, expires_at = $3::bigint + 1, last_tick = $3::bigint
						WHERE resource = $1`, resource, epoch+1, i)
				}
				return err
			})
		}, func(leases.Lease) error { return nil }},
		{"explicit ticks", func(resource string, i int64) (leases.Lease, error) {
			return store.Authority().Acquire(ctx, resource, "A", i, 1)
		}, func(leases.Lease) error { return nil }},
		{"server clock", func(resource string, i int64) (leases.Lease, error) {
			return store.Lessor().Acquire(ctx, resource, "A", time.Minute)
		}, func(l leases.Lease) error { return store.Lessor().Release(ctx, l) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			resource := fmt.Sprintf("%s #%d", b.Name(), stores.Add(1))
			var floorTime, acquireTime time.Duration
			for i := int64(1); b.Loop(); i++ {
				floorTime += timed(b, func() error { return floor(resource, i) })
				var lease leases.Lease
				acquireTime += timed(b, func() (err error) { lease, err = c.acquire(resource, i); return err })
				if err := c.after(lease); err != nil {
					b.Fatal(err)
				}
			}
			report(b, floorTime, acquireTime, "acquire")
		})
	}
}

func benchmarkGuardedTransaction(b *testing.B, db fencetest.DB) {
	ctx := fencetest.Context(b)
	store := newStore(b, db.DB, postgres.Options{})
	fences := storeFence(b, db, store)
	resource := fmt.Sprintf("%s #%d", b.Name(), stores.Add(1))
	lease, err := store.Lessor().Acquire(ctx, resource, "A", time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	tenure, err := store.Tenure(ctx, lease)
	if err != nil {
		b.Fatal(err)
	}
	row := func(tx *sql.Tx) error {
		return fencetest.InsertBusiness(ctx, db, tx, fences, resource, lease.Epoch, "row", 1)
	}
	admitted := func(result leases.WriteResult, err error) error {
		if err == nil && result.Outcome != leases.Accepted {
			err = fmt.Errorf("%+v; want accepted", result)
		}
		return err
	}
	var floorTime, guardedTime time.Duration
	for b.Loop() {
		floorTime += timed(b, func() error {
			return commit(ctx, db.DB, func(tx *sql.Tx) error {
				if err := admitted(fencetest.Fence{Table: fences}.Admit(ctx, tx, resource, lease.Epoch)); err != nil {
					return err
				}
				return row(tx)
			})
		})
		guardedTime += timed(b, func() error { return tenure.Tx(ctx, nil, row) })
	}
	report(b, floorTime, guardedTime, "guarded")
}

// commit runs fn in a transaction of db and commits it.
func commit(ctx context.Context, db *sql.DB, fn func(tx *sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// timed runs fn and returns how long it took.
func timed(b *testing.B, fn func() error) time.Duration {
	start := time.Now()
	if err := fn(); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// report gives both times per operation and their ratio.
func report(b *testing.B, floor, measured time.Duration, name string) {
	b.ReportMetric(float64(floor.Nanoseconds())/float64(b.N), "floor-ns/tx")
	b.ReportMetric(float64(measured.Nanoseconds())/float64(b.N), name+"-ns/tx")
	b.ReportMetric(float64(measured)/float64(floor), "x-floor")
}
