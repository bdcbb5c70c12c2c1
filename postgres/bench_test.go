package postgres_test

// The fence's Write in a transaction next to its floor, the same
// transaction with a bare one-row upsert (see fencetest.Benchmark), over
// the server's unix socket: on the tests' server, which does not flush
// (fsync=off), where round trips and the server's CPU show, and on one
// that flushes every commit as a production server does.
//
//	go test -run '^$' -bench Write ./postgres/...

import (
	"testing"

	"leases/fence"
	"leases/postgres/pgtest"
	"leases/testkit/fencetest"
)

func BenchmarkWrite(b *testing.B) {
	b.Run("fsync=off", func(b *testing.B) { fencetest.Benchmark(b, database(b, 1)) })
	b.Run("fsync=on", func(b *testing.B) {
		db := fencetest.DB{DB: pgtest.Open(b, pgtest.New(b, "fsync=on"), 1), Dialect: fence.PostgreSQL}
		fencetest.Benchmark(b, db)
	})
}
