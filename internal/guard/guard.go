// Package guard is the seam between package fence's Tenure and the
// stores that keep the leases in the same database as the fence (the
// SQLite and PostgreSQL backends): a Guard says how each transaction of a
// tenure is run, begun and admitted, and how its outcome is resolved
// after a commit whose answer was lost. Package fence implements the
// guard of the epoch alone; a store wraps it with its check that the
// lease is live. Users see none of this: they see *fence.Tenure.
package guard

import (
	"context"
	"database/sql"

	"leases"
	"leases/internal/sqltx"
)

// Guard admits the transactions of one tenure in one database.
type Guard interface {
	// Run runs one transaction and says which kind of outcome it had
	// (see sqltx.Run).
	Run(ctx context.Context, opts *sql.TxOptions, fn func(tx *sql.Tx) (commit bool, err error)) error
	// Begin begins lease's tenure in tx: from its commit on, no
	// transaction of an older tenure is admitted. A refusal error when it
	// must not begin.
	Begin(ctx context.Context, tx *sql.Tx, lease leases.Lease) error
	// Admit admits tx for lease, or refuses it with an error that is a
	// refusal; the marker tells Resolve, later, whether tx committed.
	Admit(ctx context.Context, tx *sql.Tx, lease leases.Lease) (Marker, error)
	// Resolve says whether the transaction admitted with m committed,
	// once it can no longer commit; an error matching
	// leases.ErrOutcomeUnknown when that cannot be told.
	Resolve(ctx context.Context, lease leases.Lease, m Marker) (committed bool, err error)
}

// Marker is what an admitted transaction leaves in its fence row to be
// found by Resolve: the row's count of admitted transactions, and the
// tag this one wrote.
type Marker struct {
	Seq, Tag int64
}

// TableOptions say how the guard of the epoch alone runs.
type TableOptions struct {
	// Run classifies each transaction's outcome.
	Run sqltx.Options
	// Runner, when set, runs each transaction instead of sqltx.Run on
	// the table's database (the SQLite store runs them on its one
	// connection, with its own checks).
	Runner func(ctx context.Context, opts *sql.TxOptions, fn func(tx *sql.Tx) (commit bool, err error)) error
	// ResolveOn, when set, gives the database that Resolve reads, and
	// closes it after (the SQLite store opens its file afresh: its own
	// connection's view may differ from the file after a failed
	// commit). Nil: the tenure's database.
	ResolveOn func(ctx context.Context) (db *sql.DB, done func() error, err error)
}

// Set by package fence, which this package cannot import.
var (
	// Tenure begins the tenure of lease with g: a *fence.Tenure.
	Tenure func(ctx context.Context, lease leases.Lease, g Guard) (any, error)
	// Table is the guard of the epoch alone on table (a *fence.Table),
	// in the table's database.
	Table func(table any, o TableOptions) Guard
	// Observe and Admit are a *fence.Table's own steps, which a tenure
	// takes: for the backends' fenced receivers (the contract's model,
	// whose Fence is an observe) and for the test kits that hold each
	// step to the receiver rule on both databases.
	Observe, Admit func(table any, ctx context.Context, tx *sql.Tx, resource string, epoch int64) (leases.WriteResult, error)
)
