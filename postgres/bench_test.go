package postgres_test

// The fence's Write in a transaction next to its floor, the same
// transaction with a bare one-row upsert (see fencetest.Benchmark), and a
// new operation through the record (ops.Do, and an HTTP request through
// httpfence.Handler) next to the same row inserted in a bare transaction
// (see opstest.Benchmark), over the server's unix socket: on the tests'
// server, which does not flush (fsync=off), where round trips and the
// server's CPU show, and on one that flushes every commit as a production
// server does.
//
//	go test -run '^$' -bench 'Write|Record' ./postgres/...

import (
	"testing"

	"leases/fence"
	"leases/postgres/pgtest"
	"leases/testkit/fencetest"
	"leases/testkit/opstest"
)

func BenchmarkWrite(b *testing.B) { onBothServers(b, fencetest.Benchmark) }

func BenchmarkRecord(b *testing.B) { onBothServers(b, opstest.Benchmark) }

func onBothServers(b *testing.B, bench func(b *testing.B, db fencetest.DB)) {
	b.Run("fsync=off", func(b *testing.B) { bench(b, database(b, 1)) })
	b.Run("fsync=on", func(b *testing.B) {
		bench(b, fencetest.DB{DB: pgtest.Open(b, pgtest.New(b, "fsync=on"), 1), Dialect: fence.PostgreSQL})
	})
}
