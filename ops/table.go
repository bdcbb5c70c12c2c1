package ops

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"

	"leases/fence"
	"leases/internal/rules"
	"leases/internal/stmtcache"
)

// DefaultTable is the record's table name unless Options say another.
const DefaultTable = "leases_ops"

// Options say which record New opens; the zero value is a table called
// DefaultTable in a SQLite database.
type Options struct {
	// Dialect is the database's: fence.SQLite (the zero value) or
	// fence.PostgreSQL.
	Dialect fence.Dialect
	// Table is the record's name: DefaultTable when empty. The newest
	// admitted epoch of each resource is kept beside it, in a fence table
	// (package leases/fence) called Table + "_fence". A plain identifier,
	// as fence.Options.Table says, of at most 57 bytes.
	Table string
}

// Table is a record of operations in one database, beside a fence table
// that keeps the newest epoch admitted for each resource. One Table
// serves any number of calls at once.
type Table struct {
	db      *sql.DB
	name    string
	fence   *fence.Table
	sql     statements
	stmts   *stmtcache.Cache
	running inFlight
}

// New returns the record that o names in db, which the caller opens with
// the driver of its choice (SQLite: _txlock=immediate, a busy_timeout,
// one connection) and closes after the last call. It talks to nobody:
// call Create once, at setup. A name that is not a plain identifier, and
// an unknown dialect, are refused with [leases.ErrInvalidInput].
func New(db *sql.DB, o Options) (*Table, error) {
	name := o.Table
	if name == "" {
		name = DefaultTable
	}
	if err := rules.CheckTableName("ops table name", name); err != nil {
		return nil, err
	}
	fences, err := fence.New(db, fence.Options{Dialect: o.Dialect, Table: name + "_fence"})
	if err != nil {
		return nil, fmt.Errorf("ops table %s: %w", name, err)
	}
	return &Table{db: db, name: name, fence: fences, sql: newStatements(fences.Dialect(), name), stmts: stmtcache.New(db)}, nil
}

// Name returns the record's table name.
func (t *Table) Name() string { return t.name }

// Schema returns the statements that [Table.Create] runs, for those who
// keep their schema in migrations: the record's table, then the fence
// table's (see fence.Table.Schema), separated by a semicolon. The record
// holds one row per operation:
//
//	resource, epoch, key  the operation (the primary key)
//	digest                SHA-256 of the call's Request
//	state                 'pending' (Begin committed, Complete not yet)
//	                      or 'done'
//	status, type, body    the Response, once done
//	created_at            when the record was first written, Unix ms
func (t *Table) Schema() string { return t.sql.create + ";\n" + t.fence.Schema() }

// Create creates both tables if they do not exist yet and compiles the
// statements. Call it once, at setup, outside any transaction of the
// record (also when the schema comes from your migrations: it then only
// compiles).
func (t *Table) Create(ctx context.Context) error {
	if err := t.fence.Create(ctx); err != nil {
		return fmt.Errorf("ops table %s: %w", t.name, err)
	}
	if _, err := t.db.ExecContext(ctx, t.sql.create); err != nil {
		return fmt.Errorf("create ops table %s: %w", t.name, err)
	}
	t.stmts.Prepare(ctx, t.sql.all())
	return nil
}

// Close releases the compiled statements of both tables; closing the
// database releases them too.
func (t *Table) Close() error {
	err := t.stmts.Close()
	if ferr := t.fence.Close(); err == nil {
		err = ferr
	}
	return err
}

// The record's statements: {table} is the table's name, $n the n-th
// argument, {blob} and {integer} the dialect's types.
const (
	createTemplate = `CREATE TABLE IF NOT EXISTS "{table}" (
	resource   {text} NOT NULL,
	epoch      {integer} NOT NULL CHECK (epoch >= 1),
	key        {text} NOT NULL,
	digest     {blob} NOT NULL,
	state      {text} NOT NULL CHECK (state IN ('pending', 'done')),
	status     {integer},
	type       {text},
	body       {blob},
	created_at {integer} NOT NULL,
	PRIMARY KEY (resource, epoch, key),
	CHECK ((state = 'done') = (status IS NOT NULL))
){strict}`

	lookupTemplate = `SELECT digest, state, status, type, body FROM "{table}"
	WHERE resource = $1 AND epoch = $2 AND key = $3`

	// insertTemplate stores an operation: done with its Response ($5 'done'),
	// or pending before an outside effect ($5 'pending', no Response).
	insertTemplate = `INSERT INTO "{table}" (resource, epoch, key, digest, state, status, type, body, created_at)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`

	completeTemplate = `UPDATE "{table}" SET state = 'done', status = $5, type = $6, body = $7
	WHERE resource = $1 AND epoch = $2 AND key = $3 AND digest = $4 AND state = 'pending'`
)

type statements struct {
	create, lookup, insert, complete string
}

func newStatements(dialect fence.Dialect, table string) statements {
	schema := strings.NewReplacer("{table}", table, "{integer}", "bigint", "{text}", "text", "{blob}", "bytea", "{strict}", "")
	dml := strings.NewReplacer("{table}", table)
	if dialect == fence.SQLite {
		schema = strings.NewReplacer("{table}", table, "{integer}", "INTEGER", "{text}", "TEXT", "{blob}", "BLOB", "{strict}", " STRICT, WITHOUT ROWID")
		dml = strings.NewReplacer("{table}", table, "$", "?")
	}
	return statements{
		create:   schema.Replace(createTemplate),
		lookup:   dml.Replace(lookupTemplate),
		insert:   dml.Replace(insertTemplate),
		complete: dml.Replace(completeTemplate),
	}
}

func (s statements) all() []string { return []string{s.lookup, s.insert, s.complete} }

// inFlight are the operations whose transaction runs in this process
// now: a retry that arrives meanwhile is answered InProgress at once,
// instead of waiting for the database (SQLite's one connection, the
// fence row's lock in PostgreSQL) and the first call's effect.
type inFlight struct {
	mu  sync.Mutex
	ops map[opKey]bool
}

type opKey struct {
	resource string
	epoch    int64
	key      string
}

// enter marks k running; false when it runs already.
func (f *inFlight) enter(k opKey) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ops[k] {
		return false
	}
	if f.ops == nil {
		f.ops = map[opKey]bool{}
	}
	f.ops[k] = true
	return true
}

func (f *inFlight) leave(k opKey) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.ops, k)
}

// checkCall refuses a call that names no operation.
func checkCall(c Call) error {
	return rules.First(rules.CheckName("resource", c.Resource), rules.CheckEpoch(c.Epoch), rules.CheckName("operation key", c.Key))
}
