package postgres_test

import (
	"os"
	"testing"

	"leases/fence"
	"leases/internal/roles"
	"leases/postgres/pgtest"
	"leases/testkit/fencetest"
)

// One server for the package's tests, each on tables of its own; the
// binary plays the roles of its tests' child processes too.
func TestMain(m *testing.M) {
	roles.Run()
	os.Exit(roles.CheckUnused(pgtest.Main(m)))
}

// database returns a handle on the shared server with at most conns
// connections (0: no limit).
func database(t testing.TB, conns int) fencetest.DB {
	t.Helper()
	return fencetest.DB{DB: pgtest.Open(t, pgtest.Shared(t), conns), Dialect: fence.PostgreSQL}
}
