package leases_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"leases/internal/experiment/experimenttest"
	"leases/internal/experiment/worker"
	"leases/internal/sqlitetest"
	"leases/internal/testctx"

	sqlitedriver "modernc.org/sqlite"
)

// isBusy reports whether err is SQLite's "database is locked".
func isBusy(err error) bool {
	var sqliteErr *sqlitedriver.Error
	return errors.As(err, &sqliteErr) && sqliteErr.Code()&0xff == 5 // SQLITE_BUSY
}

// The names the pause-and-kill and load tests use for the shared helpers
// (packages testctx, sqlitetest and experimenttest); the contract suite
// calls those packages by name.

func testContext(t *testing.T) context.Context { return testctx.Context(t) }

func tempDBPath(t *testing.T) string { return sqlitetest.Path(t) }

func openFileDirectly(t *testing.T, path string) *sql.DB { return sqlitetest.OpenDirectly(t, path) }

func skipWithoutStop(t *testing.T) { experimenttest.SkipWithoutStop(t) }

func startWorker(t *testing.T, ctx context.Context, name, path string, env ...string) *worker.Worker {
	return experimenttest.StartWorker(t, ctx, name, path, env...)
}
