// Package fencetest holds the tests of package leases/fence that every
// database must pass, for each database's test files to run on their own
// connections: the root module's on SQLite, module leases/postgres's on
// a PostgreSQL server.
//
// A test kit: used by tests only, never by shipped code (the library, the
// evidence as cmd/run-experiment links it, the commands).
package fencetest

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"testing"

	"leases"
	"leases/fence"
	"leases/internal/guard"
	"leases/testkit/testctx"
)

// Context bounds a test's waits by its deadline, less a margin so that a
// hang fails with a message (testctx.Context); it never decides an order.
func Context(t testing.TB) context.Context { return testctx.Context(t) }

// DB is a database under test.
type DB struct {
	*sql.DB
	Dialect fence.Dialect
}

// SQL adapts a statement written with PostgreSQL's $n placeholders to the
// database's dialect.
func (db DB) SQL(statement string) string {
	if db.Dialect == fence.SQLite {
		return strings.ReplaceAll(statement, "$", "?")
	}
	return statement
}

// Setup creates a fence table called name and a business table next to
// it (name + "_business": resource, epoch, value, writer), the rows that
// a worker stores in the transaction in which the fence accepted it.
func Setup(t testing.TB, db DB, name string) *fence.Table {
	t.Helper()
	ctx := Context(t)
	table, err := fence.New(db.DB, fence.Options{Dialect: db.Dialect, Table: name})
	if err != nil {
		t.Fatal(err)
	}
	if err := table.Create(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+name+`_business (
		resource TEXT NOT NULL, epoch BIGINT NOT NULL, value TEXT NOT NULL, writer BIGINT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return table
}

// Fence is a fence.Table's steps as the tests call them: its exported
// Write and Read, and the tenure's own observe and admit, which a tenure
// takes and the tests hold to the receiver rule one by one.
type Fence struct{ *fence.Table }

// Observe is the tenure's first step: the fence raised to epoch.
func (f Fence) Observe(ctx context.Context, tx *sql.Tx, resource string, epoch int64) (leases.WriteResult, error) {
	return guard.Observe(f.Table, ctx, tx, resource, epoch)
}

// Admit is each transaction's step of a tenure.
func (f Fence) Admit(ctx context.Context, tx *sql.Tx, resource string, epoch int64) (leases.WriteResult, error) {
	return guard.Admit(f.Table, ctx, tx, resource, epoch)
}

// face is one way of calling a table's statements.
type face struct {
	name string
	via  Fence
}

// faces returns the ways of calling table: one, since the table compiles
// its statements itself.
func faces(t testing.TB, db DB, table *fence.Table) []face {
	t.Helper()
	return []face{{"table", Fence{table}}}
}

// InsertBusiness stores the business row of an accepted write in tx.
func InsertBusiness(ctx context.Context, db DB, tx *sql.Tx, table *fence.Table, resource string, epoch int64, value string, writer int) error {
	_, err := tx.ExecContext(ctx, db.SQL(`INSERT INTO `+table.Name()+`_business (resource, epoch, value, writer) VALUES ($1, $2, $3, $4)`),
		resource, epoch, value, writer)
	if err != nil {
		return fmt.Errorf("business row: %w", err)
	}
	return nil
}

// BusinessRows returns the committed business rows of resource, each as
// Row renders it, sorted.
func BusinessRows(t testing.TB, db DB, table *fence.Table, resource string) []string {
	t.Helper()
	rows, err := db.QueryContext(Context(t), db.SQL(`SELECT epoch, value FROM `+table.Name()+`_business
		WHERE resource = $1`), resource)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var found []string
	for rows.Next() {
		var epoch int64
		var value string
		if err := rows.Scan(&epoch, &value); err != nil {
			t.Fatal(err)
		}
		found = append(found, Row(epoch, value))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(found)
	return found
}

// Row renders a business row as "epoch=value".
func Row(epoch int64, value string) string { return fmt.Sprintf("%d=%s", epoch, value) }

// Lease is a lease on resource at epoch, for a tenure of the fence alone,
// which looks at nothing but the resource and the epoch.
func Lease(resource string, epoch int64) leases.Lease {
	return leases.Lease{Resource: resource, Holder: fmt.Sprintf("holder-%d", epoch), Epoch: epoch}
}

// On is table opened on another handle of its database, as another
// process opens it.
func On(t testing.TB, db *sql.DB, table *fence.Table) *fence.Table {
	t.Helper()
	other, err := fence.New(db, fence.Options{Dialect: table.Dialect(), Table: table.Name()})
	if err != nil {
		t.Fatal(err)
	}
	return other
}
