package fence

import (
	"context"
	"database/sql"
	"fmt"

	"leases"
	"leases/internal/rules"
	"leases/internal/stmtcache"
)

// Dialect is the SQL database a [Table] lives in: it decides the
// placeholders and the column types of the table.
type Dialect int

const (
	// SQLite 3.37 or later, through any database/sql driver (the
	// placeholders are ?1, ?2, ...).
	SQLite Dialect = iota + 1
	// PostgreSQL 9.5 or later, through any database/sql driver (the
	// placeholders are $1, $2, ...).
	PostgreSQL
)

// String names the dialect.
func (d Dialect) String() string {
	switch d {
	case SQLite:
		return "sqlite"
	case PostgreSQL:
		return "postgresql"
	}
	return fmt.Sprintf("Dialect(%d)", int(d))
}

// DefaultTable is the table name to use unless you have a reason to pick
// another one, such as two fences in one database.
const DefaultTable = "leases_fence"

// Table is a fence table in one database. It holds the database's
// handle and its statements, compiled once: one Table serves any number
// of transactions at once.
type Table struct {
	db      *sql.DB
	dialect Dialect
	name    string
	sql     statements
	stmts   *stmtcache.Cache
}

// Options say which fence table New opens; the zero value is a table
// called DefaultTable in a SQLite database.
type Options struct {
	// Dialect is the database's: SQLite (the zero value) or PostgreSQL.
	Dialect Dialect
	// Table is the table's name: DefaultTable when empty. It must be a
	// plain identifier: lower-case ASCII letters, digits and
	// underscores, not starting with a digit nor with "sqlite_" (SQLite
	// reserves those), at most 63 bytes (PostgreSQL's limit). (Lower
	// case because PostgreSQL folds unquoted names to it: the table is
	// then the same whether your own queries quote its name or not.)
	Table string
}

// Guard begins tenures of leases whose transactions it admits in one
// database: a fence table of this package (the epoch alone, for leases
// kept elsewhere), or a store that keeps the leases in the same database
// (sqlite.Store, postgres.Store: the lease live on the store's clock
// too). The one way to fence the transactions of a lease holder.
type Guard interface {
	// Tenure begins lease's tenure: from its return on, no transaction
	// of an older tenure commits; each of the tenure's transactions runs
	// through Tenure.Tx.
	Tenure(ctx context.Context, lease leases.Lease) (*Tenure, error)
}

var _ Guard = (*Table)(nil)

// New returns the fence table that o names in db, which the caller opens
// with the driver of its choice and closes after the last call. It talks
// to nobody: call Create once, at setup, or create the table from Schema
// in your migrations. A name that is not a plain identifier, and an
// unknown dialect, are refused with [leases.ErrInvalidInput]: the name is
// written into the SQL, so nothing but such a name may reach it.
func New(db *sql.DB, o Options) (*Table, error) {
	dialect, name := o.Dialect, o.Table
	if dialect == 0 {
		dialect = SQLite
	}
	if name == "" {
		name = DefaultTable
	}
	if dialect != SQLite && dialect != PostgreSQL {
		return nil, fmt.Errorf("%w: fence dialect %v is neither SQLite nor PostgreSQL", leases.ErrInvalidInput, dialect)
	}
	if err := rules.CheckTableName("fence table name", name); err != nil {
		return nil, err
	}
	t := &Table{db: db, dialect: dialect, name: name, sql: newStatements(dialect, name)}
	t.stmts = stmtcache.New(db)
	return t, nil
}

// Name returns the table's name.
func (t *Table) Name() string { return t.name }

// Dialect returns the database the table is written for.
func (t *Table) Dialect() Dialect { return t.dialect }

// Schema returns the CREATE TABLE IF NOT EXISTS statement that
// [Table.Create] runs, for those who keep their schema in migrations:
//
//	resource    text primary key
//	epoch       integer, at least 1: the fence, the highest epoch
//	            committed by a write or an observe
//	value_epoch integer, at least 1 and at most epoch, or NULL before
//	            the first value: the epoch the value came with
//	value       text, NULL exactly when value_epoch is
//
// Integers are SQLite INTEGER (a STRICT table) or PostgreSQL bigint.
func (t *Table) Schema() string { return t.sql.create }

// Create creates the table if it does not exist yet, and compiles the
// table's statements. It does not check an existing table of that name:
// give the fence a table of its own.
//
// Call it once, at setup, and not from the transactions that use the
// fence: the schema is transactional in both databases, so a transaction
// that created the table and then rolled back would take the table with
// it, and two first transactions at once would race to create it.
func (t *Table) Create(ctx context.Context) error {
	if _, err := t.db.ExecContext(ctx, t.sql.create); err != nil {
		return fmt.Errorf("create fence table %s: %w", t.name, err)
	}
	t.stmts.Prepare(ctx, t.sql.all())
	return nil
}

// Close releases the table's compiled statements; closing the database
// releases them too. The table goes on, compiling them again when it
// next begins a tenure.
func (t *Table) Close() error { return t.stmts.Close() }
