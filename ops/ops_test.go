package ops_test

import (
	"path/filepath"
	"testing"

	"leases/fence"
	"leases/testkit/fencetest"
	"leases/testkit/opstest"
	"leases/testkit/sqlitetest"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// usersFile is a SQLite file of the test's own, opened the way a
// receiver should: immediate transactions, an explicit busy timeout, one
// connection.
func usersFile(t testing.TB) fencetest.DB {
	t.Helper()
	db := sqlitetest.OpenDirectly(t, filepath.Join(t.TempDir(), "app.db"))
	t.Cleanup(func() { _ = db.Close() })
	return fencetest.DB{DB: db, Dialect: fence.SQLite}
}

func TestOutcomesOnSQLite(t *testing.T) { opstest.Outcomes(t, usersFile(t)) }

func TestBadInputOnSQLite(t *testing.T) { opstest.BadInput(t, usersFile(t)) }

func TestRunningOnSQLite(t *testing.T) { opstest.Running(t, usersFile(t)) }
