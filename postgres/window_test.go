package postgres_test

import (
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"leases/internal/fencetest"
	"leases/internal/testctx"
	"leases/postgres"
	"leases/postgres/pgtest"
)

// windowTransactions is how many transactions TestCommitCheckWindow
// measures on each server.
const windowTransactions = 300

// The check at the commit (the store's deferred trigger <prefix>live)
// runs before the server writes the commit record: what remains of a
// commit after its lease's expiry is the instant between the two,
// measured here on servers of the test's own that keep commit
// timestamps, with fsync off (as the tests' servers run) and on (the
// COMMIT then waits for the log's flush). A second deferred constraint
// trigger on the store's fence table, created by the test alone, fires
// right after the check (deferred triggers fire in name order) and logs
// clock_timestamp(); the commit timestamp of the same transaction
// (pg_xact_commit_timestamp of the logged row's xmin) is when the server
// took the commit's time, before it flushes the record; the COMMIT's
// return at the client comes after the flush, once the commit is
// visible. The test asserts only what must hold: each logged time is at
// or before its commit timestamp, and both are before the lease's
// expiry (the lease outlives the test). The figures go to the log, for
// docs/postgres.md.
func TestCommitCheckWindow(t *testing.T) {
	for _, fsync := range []string{"off", "on"} {
		t.Run("fsync="+fsync, func(t *testing.T) {
			server := pgtest.New(t, "track_commit_timestamp=on", "fsync="+fsync)
			db := pgtest.Open(t, server, 1)
			store := newStore(t, db, postgres.Options{})
			toCommit, toReturn := measureCommitWindow(t, db, store)
			t.Logf("fsync=%s, %d transactions: from the check at the commit to the commit timestamp %s; to the COMMIT's return at the client %s",
				fsync, windowTransactions, minMedianMax(toCommit), minMedianMax(toReturn))
		})
	}
}

// logCheckedCommits adds the test's trigger to the store's fence table:
// <prefix>live_log fires after <prefix>live, in the same transaction,
// and inserts the server's clock then into <prefix>checked, a row that
// commits with the transaction (its xmin is the transaction's).
func logCheckedCommits(t *testing.T, db *sql.DB, store *postgres.Store) {
	t.Helper()
	ctx := fencetest.Context(t)
	prefix := strings.TrimSuffix(store.Tables()[0], "authority")
	names := strings.NewReplacer("{fence}", store.TenureFence().Name(), "{log}", prefix+"checked",
		"{trigger}", prefix+"live_log")
	for _, ddl := range []string{
		`CREATE TABLE "{log}" (at timestamptz NOT NULL)`,
		`CREATE FUNCTION "{trigger}"() RETURNS trigger LANGUAGE plpgsql AS $f$
		BEGIN
			INSERT INTO "{log}" (at) VALUES (pg_catalog.clock_timestamp());
			RETURN NULL;
		END $f$`,
		`CREATE CONSTRAINT TRIGGER "{trigger}" AFTER INSERT OR UPDATE ON "{fence}"
			DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION "{trigger}"()`,
	} {
		if _, err := db.ExecContext(ctx, names.Replace(ddl)); err != nil {
			t.Fatal(err)
		}
	}
}

// measureCommitWindow runs windowTransactions transactions of one
// tenure, each logged by logCheckedCommits, and returns, for each, the
// time from the logged check to its commit timestamp and to the COMMIT's
// return at the client (both clocks are the machine's).
func measureCommitWindow(t *testing.T, db *sql.DB, store *postgres.Store) (toCommit, toReturn []time.Duration) {
	t.Helper()
	ctx := fencetest.Context(t)
	// The lease outlives the test: every check is far from the expiry.
	lease, err := store.Lessor().Acquire(ctx, "window", "A", min(testctx.Bound(t), time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	tenure, err := store.Tenure(ctx, lease)
	if err != nil {
		t.Fatal(err)
	}
	logCheckedCommits(t, db, store) // after the tenure's own first transaction
	returned := make([]time.Time, windowTransactions)
	for i := range returned {
		if err := tenure.Tx(ctx, nil, func(*sql.Tx) error { return nil }); err != nil {
			t.Fatal(err)
		}
		returned[i] = time.Now()
	}
	prefix := strings.TrimSuffix(store.Tables()[0], "authority")
	rows, err := db.QueryContext(ctx, `SELECT at, pg_catalog.pg_xact_commit_timestamp(xmin) FROM "`+prefix+`checked" ORDER BY at`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	expiry := time.UnixMilli(lease.ExpiresAt)
	for i := 0; rows.Next(); i++ {
		var checked, committed time.Time
		if err := rows.Scan(&checked, &committed); err != nil {
			t.Fatal(err)
		}
		switch {
		case i >= len(returned):
			t.Fatalf("more logged commits than the %d transactions", len(returned))
		case committed.Before(checked):
			t.Fatalf("transaction %d: its commit timestamp %v is before the check at its commit, %v", i, committed, checked)
		case !committed.Before(expiry):
			t.Fatalf("transaction %d committed at %v, not before its lease's expiry %v", i, committed, expiry)
		}
		toCommit = append(toCommit, committed.Sub(checked))
		toReturn = append(toReturn, returned[i].Sub(checked))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(toCommit) != windowTransactions {
		t.Fatalf("%d logged commits; want one for each of the %d transactions", len(toCommit), windowTransactions)
	}
	return toCommit, toReturn
}

// minMedianMax renders the least, the median and the largest of ds.
func minMedianMax(ds []time.Duration) string {
	s := slices.Clone(ds)
	slices.Sort(s)
	return fmt.Sprintf("min %v, median %v, max %v", s[0], s[len(s)/2], s[len(s)-1])
}
