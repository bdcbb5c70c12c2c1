package postgres_test

import (
	"os"
	"testing"

	"leases/fence"
	"leases/internal/fencetest"
	"leases/postgres/pgtest"
)

// One server for the package's tests, each on tables of its own.
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// database returns a handle on the shared server with at most conns
// connections (0: no limit).
func database(t testing.TB, conns int) fencetest.DB {
	t.Helper()
	return fencetest.DB{DB: pgtest.Open(t, pgtest.Shared(t), conns), Dialect: fence.PostgreSQL}
}
