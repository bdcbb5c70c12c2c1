package fence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"leases"
	"leases/internal/outcome"
)

// ErrSuperseded reports that a newer epoch has reached the fence table: a
// newer lease holder has begun, and this one must not act. It is a
// refusal (it matches leases.ErrNotHolder, and leases.IsRefusal holds):
// nothing was committed.
var ErrSuperseded = fmt.Errorf("superseded, a newer epoch has reached the fence (%w)", leases.ErrNotHolder)

// Tenure is a lease holder's use of the fence for one tenure (one epoch):
// its epoch observed in the table once, when the tenure begins, and then
// each of its transactions admitted by the table. It is the safe way to
// use the fence under a session: any number of transactions per tenure,
// and no transaction of an older tenure commits after the newer tenure
// has begun. Safe for concurrent use.
type Tenure struct {
	guard    guard
	db       *sql.DB
	resource string
	epoch    int64
}

// guard is what a Table and a Prepared both do for a tenure.
type guard interface {
	Observe(ctx context.Context, tx *sql.Tx, resource string, epoch int64) (leases.WriteResult, error)
	Admit(ctx context.Context, tx *sql.Tx, resource string, epoch int64) (leases.WriteResult, error)
}

// Tenure begins the tenure of the holder of epoch on resource, in db: it
// observes epoch in a transaction of its own and commits it, so that from
// then on every transaction of an older tenure is refused, before the new
// holder has written anything (this closes the gap for all that follows).
// It returns an error matching ErrSuperseded when a newer epoch reached
// the table first. Call it right after the lease was granted, with the
// session's context, before reading or acting.
func (t *Table) Tenure(ctx context.Context, db *sql.DB, resource string, epoch int64) (*Tenure, error) {
	return begin(ctx, t, db, resource, epoch)
}

// Tenure is [Table.Tenure] with the prepared statements; db must be the
// handle they were prepared on.
func (p *Prepared) Tenure(ctx context.Context, db *sql.DB, resource string, epoch int64) (*Tenure, error) {
	return begin(ctx, p, db, resource, epoch)
}

func begin(ctx context.Context, g guard, db *sql.DB, resource string, epoch int64) (*Tenure, error) {
	tn := &Tenure{guard: g, db: db, resource: resource, epoch: epoch}
	err := tn.inTx(ctx, nil, func(tx *sql.Tx) error {
		result, err := g.Observe(ctx, tx, resource, epoch)
		if err != nil {
			return err
		}
		return tn.refuseStale(result)
	})
	if err != nil {
		return nil, fmt.Errorf("fence: begin the tenure of epoch %d on %q: %w", epoch, resource, err)
	}
	return tn, nil
}

// Epoch is the tenure's epoch.
func (tn *Tenure) Epoch() int64 { return tn.epoch }

// Tx runs fn in a transaction of the tenure and commits it: it begins a
// transaction on the tenure's database with ctx and opts, admits it
// ([Table.Admit]: the fence row is then locked until the transaction
// ends), runs fn, and commits. Pass the session's context: a transaction
// whose session has ended before the commit is rolled back, not
// committed; one whose session ends while its COMMIT is on its way has an
// unknown outcome.
//
// The error says which of these happened:
//   - ErrSuperseded: a newer epoch reached the table; nothing committed,
//     and this holder must stop.
//   - fn's error: rolled back, fn's error returned (wrapped).
//   - leases.ErrOutcomeUnknown: the commit was sent and failed, also
//     when ctx ended while it was on its way; it may have committed.
//     Read your rows (or the fence row) before retrying.
//   - anything else (also ctx's end): a failure before commit, nothing
//     committed; the transaction may be retried while the lease lasts.
//
// While fn runs, the transaction holds the fence row: a holder that
// pauses there (a stopped process, a long call) holds back the next
// holder's first transaction until the database ends it. Bound it: in
// PostgreSQL with idle_in_transaction_session_timeout (or a statement
// timeout), in SQLite with the other side's busy timeout.
func (tn *Tenure) Tx(ctx context.Context, opts *sql.TxOptions, fn func(tx *sql.Tx) error) error {
	err := tn.inTx(ctx, opts, func(tx *sql.Tx) error {
		result, err := tn.guard.Admit(ctx, tx, tn.resource, tn.epoch)
		if err != nil {
			return err
		}
		if err := tn.refuseStale(result); err != nil {
			return err
		}
		return fn(tx)
	})
	if err != nil {
		return fmt.Errorf("fence: transaction of epoch %d on %q: %w", tn.epoch, tn.resource, err)
	}
	return nil
}

func (tn *Tenure) refuseStale(result leases.WriteResult) error {
	if result.Outcome == leases.Stale {
		return fmt.Errorf("%w: the table is at epoch %d", ErrSuperseded, result.Record.Epoch)
	}
	return nil
}

// inTx runs fn in a transaction and commits it, telling a failure before
// the commit from a commit whose outcome is unknown.
func (tn *Tenure) inTx(ctx context.Context, opts *sql.TxOptions, fn func(tx *sql.Tx) error) error {
	tx, err := tn.db.BeginTx(ctx, opts)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(tx); err != nil {
		return errors.Join(err, ignoreDone(tx.Rollback()))
	}
	if ctx.Err() != nil {
		// Ended before the commit was sent: nothing committed.
		return errors.Join(notCommitted(ctx), ignoreDone(tx.Rollback()))
	}
	if err := tx.Commit(); err != nil {
		if outcome.CommitNotSent(ctx, tx, err) {
			return notCommitted(ctx)
		}
		return outcome.Unknown(ctx, fmt.Errorf("commit failed: %w", err))
	}
	return nil
}

// notCommitted is the error of a transaction that ctx's end stopped
// before its commit: it matches ctx's error and its cause.
func notCommitted(ctx context.Context) error {
	if cause := context.Cause(ctx); !errors.Is(cause, ctx.Err()) {
		return fmt.Errorf("not committed: %w: %w", ctx.Err(), cause)
	}
	return fmt.Errorf("not committed: %w", ctx.Err())
}

func ignoreDone(err error) error {
	if errors.Is(err, sql.ErrTxDone) {
		return nil
	}
	return err
}
