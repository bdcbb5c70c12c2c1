package ops_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"

	"leases/fence"
	"leases/ops"
	"leases/sqlite"
	"leases/testkit/fencetest"
	"leases/testkit/opstest"
)

// A call whose COMMIT was sent and whose answer was lost (the receiver's
// connection to its database broke after the COMMIT went out: the
// database committed it, or did not) has an unknown outcome, and the
// caller's answer to it is the same call again: the record tells. Here
// SQLite's driver is wrapped so that the next COMMIT's answer is lost;
// the database underneath is the real file. (On PostgreSQL, module
// leases/postgres cuts a real COMMIT off with the context.)
func TestALostCommitIsAnsweredByTheRecord(t *testing.T) {
	for _, c := range []struct {
		name      string
		committed bool
	}{
		{"it committed", true},
		{"it did not commit", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			lose := &losing{}
			db := fencetest.DB{DB: openLossy(t, lose), Dialect: fence.SQLite}
			table := opstest.Setup(t, db, "ops_lost")
			call := ops.Call{Resource: "r", Epoch: 1, Key: "k", Request: []byte("a")}
			lose.next.Store(true)
			lose.commit = c.committed
			_, lost := table.Do(fencetest.Context(t), call, opstest.Effect(db, table, call, "a"))
			result, err := opstest.Again(fencetest.Context(t), db, table, call)
			opstest.CheckRetry(t, db, table, call, lost, c.committed, result, err)
		})
	}
}

// losing says which COMMIT's answer is lost: the next one, once next is
// set; commit says whether the database commits it or rolls it back.
type losing struct {
	next   atomic.Bool
	commit bool
}

var errAnswerLost = errors.New("the connection broke before the COMMIT's answer")

func openLossy(t testing.TB, lose *losing) *sql.DB {
	t.Helper()
	plain, err := sql.Open("sqlite", "") // for its driver: it connects to nothing
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	path := filepath.Join(t.TempDir(), "app.db")
	dsn := fmt.Sprintf("%s?_txlock=immediate&_pragma=busy_timeout(%d)", path, sqlite.DefaultBusyTimeout.Milliseconds())
	db := sql.OpenDB(&lossyConnector{driver: plain.Driver(), dsn: dsn, lose: lose})
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

type lossyConnector struct {
	driver driver.Driver
	dsn    string
	lose   *losing
}

func (c *lossyConnector) Connect(context.Context) (driver.Conn, error) {
	conn, err := c.driver.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	return &lossyConn{Conn: conn, lose: c.lose}, nil
}

func (c *lossyConnector) Driver() driver.Driver { return c.driver }

// lossyConn is the driver's connection, whose transactions lose their
// COMMIT's answer when told.
type lossyConn struct {
	driver.Conn
	lose *losing
}

func (c *lossyConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	tx, err := c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &lossyTx{Tx: tx, lose: c.lose}, nil
}

func (c *lossyConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	return c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, query)
}

func (c *lossyConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	return c.Conn.(driver.ExecerContext).ExecContext(ctx, query, args)
}

func (c *lossyConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	return c.Conn.(driver.QueryerContext).QueryContext(ctx, query, args)
}

type lossyTx struct {
	driver.Tx
	lose *losing
}

func (tx *lossyTx) Commit() error {
	if !tx.lose.next.CompareAndSwap(true, false) {
		return tx.Tx.Commit()
	}
	if !tx.lose.commit {
		return errors.Join(errAnswerLost, tx.Tx.Rollback())
	}
	return errors.Join(errAnswerLost, tx.Tx.Commit())
}
