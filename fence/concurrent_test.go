package fence_test

import (
	"errors"
	"path/filepath"
	"testing"

	"leases/testkit/fencetest"

	sqlitedriver "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// writers opens n handles on one SQLite file, one connection each, as n
// processes would.
func writers(t *testing.T, n int, txlock string) []fencetest.DB {
	t.Helper()
	path := filepath.Join(t.TempDir(), "app.db")
	dbs := make([]fencetest.DB, n)
	for i := range dbs {
		dbs[i] = openSQLite(t, path, txlock)
	}
	return dbs
}

// Transactions that take the write lock at BEGIN wait for each other:
// none fails, and the fence holds.
func TestConcurrentWritersOnSQLite(t *testing.T) {
	failed := fencetest.Concurrent(t, fencetest.Load{DBs: writers(t, 6, "immediate"), Table: "fence", Transactions: 40})
	if failed > 0 {
		t.Errorf("%d transactions failed; with _txlock=immediate none should", failed)
	}
}

// DEFERRED transactions that read before they reach the fence must
// upgrade to a writer, and SQLite refuses that with SQLITE_BUSY when
// another connection wrote in between: the fence then fails, never
// accepts wrongly.
func TestConcurrentDeferredWritersOnSQLite(t *testing.T) {
	failed := fencetest.Concurrent(t, fencetest.Load{
		DBs: writers(t, 3, "deferred"), Table: "fence", Transactions: 60, ReadFirst: true, Expected: isBusy,
	})
	t.Logf("%d transactions failed with SQLITE_BUSY", failed)
}

func isBusy(err error) bool {
	var sqliteErr *sqlitedriver.Error
	return errors.As(err, &sqliteErr) && sqliteErr.Code()&0xff == sqlite3.SQLITE_BUSY
}
