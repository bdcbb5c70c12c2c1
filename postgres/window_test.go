package postgres_test

import (
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"leases"
	"leases/fence"
	"leases/postgres"
	"leases/postgres/pgtest"
	"leases/testkit/fencetest"
	"leases/testkit/testctx"
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

// What remains of the check at the commit, the instant between the check
// and the commit record, cannot let a transaction commit after the next
// holder's grant: the transaction holds the lease row's key-share lock
// until it ends, and the grant waits for it. The test stretches that
// instant: a second deferred trigger of its own, after the check, waits
// for an advisory lock the test holds, so that the transaction has passed
// its check, while its lease was live, and has not committed. The lease
// then expires and the next holder asks: it waits; the transaction
// commits; only then is the next holder granted. Without the key-share
// lock (the admission's read without it) the next holder is granted while
// the checked transaction is still to commit, and it commits after the
// grant.
func TestTheNextGrantWaitsForACommitPastItsCheck(t *testing.T) {
	ctx := fencetest.Context(t)
	db := database(t, 0)
	store := newStore(t, db.DB, postgres.Options{})
	prefix := strings.TrimSuffix(store.Tables()[0], "authority")
	key := stores.Add(1) // an advisory lock of this test's own
	for _, ddl := range []string{
		fmt.Sprintf(`CREATE FUNCTION "%slive_stall"() RETURNS trigger LANGUAGE plpgsql AS $f$
		BEGIN
			PERFORM pg_catalog.pg_advisory_xact_lock(%d);
			RETURN NULL;
		END $f$`, prefix, key),
		fmt.Sprintf(`CREATE CONSTRAINT TRIGGER "%slive_stall" AFTER INSERT OR UPDATE ON "%s"
			DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION "%slive_stall"()`, prefix, store.TenureFence().Name(), prefix),
	} {
		if _, err := db.ExecContext(ctx, ddl); err != nil {
			t.Fatal(err)
		}
	}
	holder, err := db.Conn(ctx) // the test's hold on the advisory lock
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	// The lease must outlive A's check: on a loaded machine 300 ms may
	// not be enough to get there, and A acquires again for twice as long.
	var (
		a         leases.Lease
		committed = make(chan error, 1)
	)
	// tooLate takes a transaction of a's that ended before the stall held
	// it: its check found the lease expired (a loaded machine took longer
	// than the TTL to get there), so the test lets the advisory lock go
	// and tries again with a longer lease. Any other end fails the test.
	tooLate := func(err error) {
		t.Helper()
		if !errors.Is(err, leases.ErrNotLive) {
			t.Fatalf("a transaction ended before the stall held it: %v", err)
		}
		if _, err := holder.ExecContext(ctx, `SELECT pg_catalog.pg_advisory_unlock($1)`, key); err != nil {
			t.Fatal(err)
		}
		awaitServerClock(t, db.DB, a.ExpiresAt)
		t.Logf("the lease ran out before its transaction reached the stall (%v); again with twice the TTL", err)
	}
	for ttl := 300 * time.Millisecond; ; ttl *= 2 {
		if _, err := holder.ExecContext(ctx, `SELECT pg_catalog.pg_advisory_lock($1)`, key); err != nil {
			t.Fatal(err)
		}
		if a, err = store.Lessor().Acquire(ctx, "stretched", "A", ttl); err != nil {
			t.Fatal(err)
		}
		var tenure *fence.Tenure
		go func() { // its first transaction stalls too: let it go
			var err error
			tenure, err = store.Tenure(ctx, a)
			committed <- err
		}()
		if !awaitLockWaitOr(t, db.DB, committed, nil) {
			tooLate(<-committed) // refused before it reached the stall
			continue
		}
		if _, err := holder.ExecContext(ctx, `SELECT pg_catalog.pg_advisory_unlock($1)`, key); err != nil {
			t.Fatal(err)
		}
		if err := <-committed; errors.Is(err, leases.ErrNotLive) {
			awaitServerClock(t, db.DB, a.ExpiresAt)
			continue
		} else if err != nil {
			t.Fatal(err)
		}
		if _, err := holder.ExecContext(ctx, `SELECT pg_catalog.pg_advisory_lock($1)`, key); err != nil {
			t.Fatal(err)
		}
		go func() { committed <- tenure.Tx(ctx, nil, func(*sql.Tx) error { return nil }) }()
		if !awaitLockWaitOr(t, db.DB, committed, nil) {
			tooLate(<-committed) // refused before it reached the stall
			continue
		}
		var checked bool // A's COMMIT waits in the stall, or its check refused it
		if err := db.QueryRowContext(ctx, `SELECT count(*) > 0 FROM pg_stat_activity WHERE wait_event = 'advisory'`).Scan(&checked); err != nil {
			t.Fatal(err)
		}
		if checked {
			break
		}
		if _, err := holder.ExecContext(ctx, `SELECT pg_catalog.pg_advisory_unlock($1)`, key); err != nil {
			t.Fatal(err)
		}
		if err := <-committed; !errors.Is(err, leases.ErrNotLive) {
			t.Fatal(err)
		}
		awaitServerClock(t, db.DB, a.ExpiresAt)
	}
	awaitServerClock(t, db.DB, a.ExpiresAt) // A's lease has expired; its checked COMMIT is still to come
	granted := make(chan error, 1)
	go func() {
		_, err := store.Lessor().Acquire(ctx, "stretched", "B", time.Minute)
		granted <- err
	}()
	for waiting := 0; waiting < 2; { // A in the stall, and B on the lease row
		select {
		case err := <-granted:
			_, _ = holder.ExecContext(ctx, `SELECT pg_catalog.pg_advisory_unlock($1)`, key)
			t.Fatalf("B was granted (%v) while A's transaction, checked while its lease lived, was still to commit: "+
				"it commits after the grant (then: %v)", err, <-committed)
		default:
		}
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := holder.ExecContext(ctx, `SELECT pg_catalog.pg_advisory_unlock($1)`, key); err != nil {
		t.Fatal(err)
	}
	if err := <-committed; err != nil {
		t.Fatalf("A's transaction, checked while its lease lived: %v", err)
	}
	if err := <-granted; err != nil {
		t.Fatal(err)
	}
}
