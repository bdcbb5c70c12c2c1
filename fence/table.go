package fence

import (
	"context"
	"database/sql"
	"fmt"

	"leases"
	"leases/internal/rules"
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

// Table is a fence table in one database. It holds no connection and no
// state besides its statements: one Table serves any number of
// transactions at once.
type Table struct {
	dialect Dialect
	name    string
	sql     statements
}

// New returns the fence table called name in a database of the given
// dialect. The name must be a plain identifier: lower-case ASCII letters,
// digits and underscores, not starting with a digit nor with "sqlite_"
// (SQLite reserves those), at most 63 bytes (PostgreSQL's limit). Anything
// else, and an unknown dialect, is refused with [leases.ErrInvalidInput]:
// the name is written into the SQL, so nothing but such a name may reach
// it. (Lower case because PostgreSQL folds unquoted names to it: the table
// is then the same whether your own queries quote its name or not.)
func New(dialect Dialect, name string) (*Table, error) {
	if dialect != SQLite && dialect != PostgreSQL {
		return nil, fmt.Errorf("%w: fence dialect %v is neither SQLite nor PostgreSQL", leases.ErrInvalidInput, dialect)
	}
	if err := rules.CheckTableName("fence table name", name); err != nil {
		return nil, err
	}
	return &Table{dialect: dialect, name: name, sql: newStatements(dialect, name)}, nil
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

// Execer runs a statement: *sql.DB, *sql.Conn and *sql.Tx are Execers.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Create creates the table if it does not exist yet. It does not check an
// existing table of that name: give the fence a table of its own.
//
// Call it once, at setup, and not from the transactions that use the
// fence: the schema is transactional in both databases, so a transaction
// that created the table and then rolled back would take the table with
// it, and two first transactions at once would race to create it.
func (t *Table) Create(ctx context.Context, db Execer) error {
	if _, err := db.ExecContext(ctx, t.sql.create); err != nil {
		return fmt.Errorf("create fence table %s: %w", t.name, err)
	}
	return nil
}
