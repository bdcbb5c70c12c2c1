package fence_test

import (
	"database/sql"
	"fmt"
	"math"
	"net/url"
	"path/filepath"
	"testing"

	"leases/fence"
	"leases/testkit/fencetest"
	"leases/testkit/testctx"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// openSQLite opens the SQLite file at path the way a user of the fence
// should: WAL, an explicit busy timeout, and transactions that take the
// write lock at BEGIN (txlock "immediate") unless the test says
// otherwise. One connection per handle, as the project's rules ask.
func openSQLite(t testing.TB, path, txlock string) fencetest.DB {
	t.Helper()
	options := url.Values{}
	options.Set("_txlock", txlock)
	// The busy timeout bounds how long a transaction waits for another
	// connection's write lock; it orders nothing, so the test's own
	// deadline bounds it (the tests assert that no writer gives up).
	// (SQLite takes it as a C int of milliseconds.)
	options.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", min(testctx.Bound(t).Milliseconds(), math.MaxInt32)))
	options.Add("_pragma", "journal_mode(WAL)")
	db, err := sql.Open("sqlite", path+"?"+options.Encode())
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { _ = db.Close() })
	return fencetest.DB{DB: db, Dialect: fence.SQLite}
}

// usersFile is a SQLite file of the test's own, like a user's database.
func usersFile(t testing.TB) fencetest.DB {
	t.Helper()
	return openSQLite(t, filepath.Join(t.TempDir(), "app.db"), "immediate")
}

func TestOutcomesOnSQLite(t *testing.T) { fencetest.Outcomes(t, usersFile(t)) }

func TestRuleOnSQLite(t *testing.T) { fencetest.Rule(t, usersFile(t)) }

func TestBadInputOnSQLite(t *testing.T) { fencetest.BadInput(t, usersFile(t)) }

func TestTenuresOnSQLite(t *testing.T) { fencetest.Tenures(t, usersFile(t)) }
