package postgres_test

import (
	"database/sql"
	"errors"
	"testing"

	"leases/testkit/fencetest"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestOutcomesOnPostgreSQL(t *testing.T) { fencetest.Outcomes(t, database(t, 0)) }

func TestRuleOnPostgreSQL(t *testing.T) { fencetest.Rule(t, database(t, 0)) }

func TestBadInputOnPostgreSQL(t *testing.T) { fencetest.BadInput(t, database(t, 0)) }

func TestTenuresOnPostgreSQL(t *testing.T) { fencetest.Tenures(t, database(t, 0)) }

// writers returns n handles of one connection each, as n processes.
func writers(t *testing.T, n int) []fencetest.DB {
	t.Helper()
	dbs := make([]fencetest.DB, n)
	for i := range dbs {
		dbs[i] = database(t, 1)
	}
	return dbs
}

// Under READ COMMITTED, PostgreSQL's default, nothing fails: a writer
// that meets a row another transaction holds waits for it, then decides
// on the version that transaction committed.
func TestConcurrentWritersReadCommitted(t *testing.T) {
	failed := fencetest.Concurrent(t, fencetest.Load{
		DBs: writers(t, 8), Table: "fence_read_committed", Transactions: 50, Isolation: sql.LevelReadCommitted,
	})
	if failed > 0 {
		t.Errorf("%d transactions failed under READ COMMITTED; none should", failed)
	}
}

// Under SERIALIZABLE a writer that meets a row changed after its snapshot
// fails with a serialization failure, which reaches the caller unchanged
// and is retried; no write is accepted wrongly.
func TestConcurrentWritersSerializable(t *testing.T) {
	failed := fencetest.Concurrent(t, fencetest.Load{
		DBs: writers(t, 8), Table: "fence_serializable", Transactions: 50, Isolation: sql.LevelSerializable,
		ReadFirst: true, Expected: isSerializationFailure,
	})
	t.Logf("%d transactions failed with a serialization failure", failed)
}

// isSerializationFailure reports SQLSTATE 40001, which PostgreSQL answers
// under REPEATABLE READ and SERIALIZABLE when the transaction would not
// be serializable: nothing it did is committed, and it may be retried.
func isSerializationFailure(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "40001"
}
