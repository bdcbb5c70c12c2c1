package fence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"

	"leases"
	"leases/internal/guard"
	"leases/internal/sqltx"
)

// epochGuard admits a tenure's transactions on the epoch alone: a
// transaction of the newest tenure the table has seen is admitted, one of
// an older tenure is not.
type epochGuard struct {
	table *Table
	run   runner
	db    *sql.DB
	opts  guard.TableOptions
}

var _ guard.Guard = (*epochGuard)(nil)

func (g *epochGuard) Run(ctx context.Context, opts *sql.TxOptions, fn func(tx *sql.Tx) (bool, error)) error {
	if g.opts.Runner != nil {
		return g.opts.Runner(ctx, opts, fn)
	}
	o := g.opts.Run
	o.Tx = opts
	if o.Known == nil {
		o.Known = known
	}
	return sqltx.Run(ctx, g.db, o, fn)
}

// known says of a failed COMMIT on any database whether the server's
// answer proves that it rolled the transaction back (sqltx.RolledBack).
func known(_ context.Context, err error) error {
	return sqltx.RolledBack(err)
}

func (g *epochGuard) Begin(ctx context.Context, tx *sql.Tx, lease leases.Lease) error {
	result, err := g.table.observe(ctx, g.run, tx, lease.Resource, lease.Epoch)
	if err != nil {
		return err
	}
	return superseded(result)
}

func (g *epochGuard) Admit(ctx context.Context, tx *sql.Tx, lease leases.Lease) (guard.Marker, error) {
	result, m, err := g.table.admit(ctx, g.run, tx, lease.Resource, lease.Epoch)
	if err != nil {
		return guard.Marker{}, err
	}
	return m, superseded(result)
}

func (g *epochGuard) Resolve(ctx context.Context, lease leases.Lease, m guard.Marker) (bool, error) {
	db, done := g.db, func() error { return nil }
	if g.opts.ResolveOn != nil {
		var err error
		if db, done, err = g.opts.ResolveOn(ctx); err != nil {
			return false, err
		}
	}
	var committed bool
	var err error
	if g.table.dialect == PostgreSQL {
		committed, err = g.table.resolvePostgres(ctx, db, lease.Resource, m)
	} else {
		committed, err = g.table.resolveSQLite(ctx, db, lease.Resource, m)
	}
	return committed, errors.Join(err, done())
}

// newMarker is the marker of a transaction about to be admitted: its tag
// is drawn now, its count or id is filled in by the admit.
func newMarker() guard.Marker { return guard.Marker{Tag: rand.Int64()} }

// markerArgs and markerScans are the admit statement's arguments and its
// RETURNING destinations beyond the record's, by dialect (see markers).
func markerArgs(d Dialect, m *guard.Marker, args []any) []any {
	if d == SQLite {
		return append(args, m.Tag)
	}
	return args
}

func markerScans(d Dialect, m *guard.Marker) []any {
	if d == SQLite {
		return []any{&m.Seq}
	}
	return []any{&m.XID}
}

// resolvePostgres asks the server what became of the transaction with id
// m.XID: committed or aborted is final; while it is in progress (the
// COMMIT on its way, or a connection that died and a backend that has
// not noticed yet), it waits for the resource's fence row, which that
// transaction's admit locked until it ends, and asks again.
func (t *Table) resolvePostgres(ctx context.Context, db *sql.DB, resource string, m guard.Marker) (bool, error) {
	for {
		var status sql.NullString
		if err := db.QueryRowContext(ctx, t.sql.status, m.XID).Scan(&status); err != nil {
			return false, fmt.Errorf("read the status of transaction %s: %w", m.XID, err)
		}
		switch status.String {
		case "committed":
			return true, nil
		case "aborted":
			return false, nil
		case "in progress":
		default:
			return false, fmt.Errorf("%w: the server no longer knows transaction %s", leases.ErrOutcomeUnknown, m.XID)
		}
		err := sqltx.Run(ctx, db, sqltx.Options{}, func(tx *sql.Tx) (bool, error) {
			_, err := tx.ExecContext(ctx, t.sql.wait, resource)
			return false, err
		})
		if err != nil {
			return false, fmt.Errorf("wait for transaction %s to end: %w", m.XID, err)
		}
	}
}

// errRowMoved reports that the marker can no longer tell: a later
// transaction of the resource has committed since the one to resolve.
var errRowMoved = errors.New("a later transaction of the resource has committed since")

// resolveSQLite reads the marker of the resource's fence row under the
// write lock: the transaction committed if the row holds its count and
// tag, and did not if the count is below it, or is its count with
// another tag (a later transaction took its place). A "did not" is made
// final by rewriting the row with a new tag in a transaction that
// commits: its frames take the place, in the log, of those of a commit
// that failed to be indexed (an fsync that failed), whose checksums then
// no longer follow on, so that no later recovery of the log can bring
// them back. The tag is new so that the row's bytes change: SQLite
// writes nothing for an UPDATE that stores what the row holds.
func (t *Table) resolveSQLite(ctx context.Context, db *sql.DB, resource string, m guard.Marker) (bool, error) {
	var committed bool
	err := sqltx.Run(ctx, db, sqltx.Options{}, func(tx *sql.Tx) (bool, error) {
		var seq int64
		var tag sql.NullInt64
		if err := tx.QueryRowContext(ctx, t.sql.mark, resource).Scan(&seq, &tag); err != nil {
			return false, fmt.Errorf("read the fence row of %q: %w", resource, err)
		}
		switch {
		case seq == m.Seq && tag.Int64 == m.Tag:
			committed = true
			return false, nil
		case seq > m.Seq:
			return false, fmt.Errorf("%w: %w (the row counts %d transactions, this one was %d)",
				leases.ErrOutcomeUnknown, errRowMoved, seq, m.Seq)
		}
		final := newMarker().Tag
		for final == tag.Int64 || final == m.Tag {
			final = newMarker().Tag
		}
		_, err := tx.ExecContext(ctx, t.sql.final, resource, final)
		return true, err
	})
	return committed, err
}
