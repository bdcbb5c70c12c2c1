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
	return sqltx.Run(ctx, g.table.db, o, fn)
}

// known says of a failed COMMIT on any database whether the server's
// answer proves that it rolled the transaction back (sqltx.RolledBack).
func known(_ context.Context, err error) error {
	return sqltx.RolledBack(err)
}

func (g *epochGuard) Begin(ctx context.Context, tx *sql.Tx, lease leases.Lease) error {
	result, err := g.table.observe(ctx, tx, lease.Resource, lease.Epoch)
	if err != nil {
		return err
	}
	return superseded(result, lease.Epoch)
}

func (g *epochGuard) Admit(ctx context.Context, tx *sql.Tx, lease leases.Lease) (guard.Marker, error) {
	result, m, err := g.table.admit(ctx, tx, lease.Resource, lease.Epoch)
	if err != nil {
		return guard.Marker{}, err
	}
	return m, superseded(result, lease.Epoch)
}

func (g *epochGuard) Resolve(ctx context.Context, lease leases.Lease, m guard.Marker) (bool, error) {
	db, done := g.table.db, func() error { return nil }
	if g.opts.ResolveOn != nil {
		var err error
		if db, done, err = g.opts.ResolveOn(ctx); err != nil {
			return false, err
		}
	}
	committed, err := g.table.resolve(ctx, db, lease, m)
	return committed, errors.Join(err, done())
}

// newMarker is the marker of a transaction about to be admitted: its tag
// is drawn now, its count or id is filled in by the admit.
func newMarker() guard.Marker { return guard.Marker{Tag: rand.Int64()} }

// markerArgs and markerScans are the admit statement's arguments and its
// RETURNING destinations beyond the record's (see markers).
func markerArgs(m *guard.Marker, args []any) []any { return append(args, m.Tag) }

func markerScans(m *guard.Marker) []any { return []any{&m.Seq} }

// errRowMoved reports that the marker can no longer tell: a later
// transaction of the tenure has committed since the one to resolve, or
// two newer tenures have begun since.
var errRowMoved = errors.New("the row no longer tells")

// resolve reads the resource's markers once the transaction admitted
// with m can no longer commit (see markers): on PostgreSQL under a share
// lock, which waits for that transaction, which holds the row until it
// ends (its backend still committing, or not yet aware that its client
// is gone); on SQLite under the write lock, of a connection of its own.
// A "not committed" on SQLite is made final by rewriting the row in a
// transaction that commits (see finalTemplate).
func (t *Table) resolve(ctx context.Context, db *sql.DB, lease leases.Lease, m guard.Marker) (bool, error) {
	var committed bool
	err := sqltx.Run(ctx, db, sqltx.Options{}, func(tx *sql.Tx) (bool, error) {
		var epoch int64
		var seq, tag, prevEpoch, prevSeq, prevTag sql.NullInt64
		if err := tx.QueryRowContext(ctx, t.sql.mark, lease.Resource).Scan(&epoch, &seq, &tag, &prevEpoch, &prevSeq, &prevTag); err != nil {
			return false, fmt.Errorf("read the fence row of %q: %w", lease.Resource, err)
		}
		switch {
		case epoch == lease.Epoch:
		case prevEpoch.Int64 == lease.Epoch:
			seq, tag = prevSeq, prevTag
		default:
			return false, fmt.Errorf("%w: %w: the fence is at epoch %d, and the epoch before it was %d",
				leases.ErrOutcomeUnknown, errRowMoved, epoch, prevEpoch.Int64)
		}
		switch {
		case seq.Int64 == m.Seq && tag.Int64 == m.Tag:
			committed = true
			return false, nil
		case seq.Int64 > m.Seq:
			return false, fmt.Errorf("%w: %w: a later transaction of the tenure committed (the row counts %d transactions, this one was %d)",
				leases.ErrOutcomeUnknown, errRowMoved, seq.Int64, m.Seq)
		case t.dialect != SQLite:
			return false, nil
		}
		_, err := tx.ExecContext(ctx, t.sql.final, lease.Resource)
		return true, err
	})
	return committed, err
}
