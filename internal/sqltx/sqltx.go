// Package sqltx runs one database/sql transaction and says, in the error
// it returns, which of package leases' three kinds of outcome it had: fn
// refused or failed, or something else failed before the COMMIT was sent
// (nothing committed); the database answered the COMMIT with a rollback
// it is known to have made (nothing committed); or the COMMIT was sent
// and no answer tells (leases.ErrOutcomeUnknown). Every error of a
// transaction whose context has ended also matches the context's error
// and its cause (a session's end, say), whatever the driver returned.
//
// Every backend and package fence run their transactions through Run, so
// that the rule is written once.
package sqltx

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"leases/internal/outcome"
)

// Beginner begins transactions: *sql.DB and *sql.Conn are Beginners.
type Beginner interface {
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

// Options say how to run and classify one transaction; the zero value
// runs it with the database's defaults and takes every failed COMMIT that
// was sent for an unknown outcome.
type Options struct {
	// Tx is handed to BeginTx.
	Tx *sql.TxOptions
	// Known, when set, looks at the error of a COMMIT that was sent: when
	// the database's answer proves that it rolled the transaction back
	// (a serialization failure, a check at commit, a session the server
	// had ended), it returns the error to return instead, which must not
	// match leases.ErrOutcomeUnknown; otherwise nil, and the outcome is
	// unknown.
	Known func(ctx context.Context, err error) error
	// Step, when set, runs before each step ("begin", "commit",
	// "rollback"): the interleaving tests hold a step there. Nothing else
	// sets it.
	Step func(ctx context.Context, name string)
}

// ErrNotCommitted is the failure of a transaction that the context's end
// stopped before its COMMIT was sent: nothing committed.
var ErrNotCommitted = errors.New("not committed")

// Run runs fn in one transaction of db and commits it when fn says so (a
// transaction that changes nothing rolls back). The error says which of
// three things happened:
//
//   - fn's error, or a failure to begin, or the context's end before the
//     COMMIT was sent: nothing committed. The error matches fn's (a
//     refusal stays a refusal) and, when the context has ended, the
//     context's error and its cause.
//   - a COMMIT that Options.Known proves rolled back: its error.
//   - any other failed COMMIT: leases.ErrOutcomeUnknown.
func Run(ctx context.Context, db Beginner, o Options, fn func(tx *sql.Tx) (commit bool, err error)) error {
	o.step(ctx, "begin")
	tx, err := db.BeginTx(ctx, o.Tx)
	if err != nil {
		return outcome.BeforeCommit(ctx, fmt.Errorf("begin: %w", err))
	}
	commit, err := fn(tx)
	if err != nil {
		o.step(ctx, "rollback")
		return outcome.BeforeCommit(ctx, rolledBack(err, tx.Rollback()))
	}
	if !commit {
		// A transaction that changes nothing: whether the rollback
		// arrives or not, nothing was committed.
		o.step(ctx, "rollback")
		_ = tx.Rollback()
		return nil
	}
	if ctx.Err() != nil {
		// Ended before the commit was sent: nothing committed.
		_ = tx.Rollback()
		return outcome.BeforeCommit(ctx, ErrNotCommitted)
	}
	o.step(ctx, "commit")
	err = tx.Commit()
	if err == nil {
		return nil
	}
	return Classify(ctx, tx, err, o.Known)
}

// Classify is the error of tx, whose Commit failed with err: a COMMIT
// that database/sql never sent (ErrNotCommitted, nothing committed), one
// that known proves rolled back (known's error), or an unknown outcome.
func Classify(ctx context.Context, tx *sql.Tx, err error, known func(ctx context.Context, err error) error) error {
	// A driver's word that nothing of the COMMIT reached the server is
	// not taken: pgx marks "conn closed" safe to retry after a COMMIT it
	// wrote, when the connection died before the answer (seen in the
	// chaos test).
	if outcome.CommitNotSent(ctx, tx, err) {
		return outcome.BeforeCommit(ctx, fmt.Errorf("%w: %w", ErrNotCommitted, err))
	}
	if known != nil {
		if refused := known(ctx, err); refused != nil {
			return outcome.BeforeCommit(ctx, refused)
		}
	}
	return outcome.Unknown(ctx, fmt.Errorf("commit failed: %w", err))
}

func (o Options) step(ctx context.Context, name string) {
	if o.Step != nil {
		o.Step(ctx, name)
	}
}

// rolledBack is err, the failure that ended a transaction, with its
// rollback's failure, if any, on the same line.
func rolledBack(err, rollback error) error {
	if rollback == nil || errors.Is(rollback, sql.ErrTxDone) {
		return err
	}
	return fmt.Errorf("%w (and the rollback failed: %v)", err, rollback)
}

// SQLState is the SQLSTATE of a driver's error, for drivers whose errors
// have a SQLState() string method (pgx's *pgconn.PgError and lib/pq's
// *pq.Error have); "" for any other error.
func SQLState(err error) string {
	var coded interface{ SQLState() string }
	if !errors.As(err, &coded) {
		return ""
	}
	return coded.SQLState()
}

// rollbacks are the SQLSTATEs with which PostgreSQL answers a COMMIT, or
// any statement, of a transaction it has rolled back, or of a session it
// ended with its transaction rolled back: nothing of it committed.
var rollbacks = map[string]string{
	"40001": "serialization failure",
	"40P01": "deadlock",
	"25P03": "the server ended the session: idle in a transaction for longer than idle_in_transaction_session_timeout",
}

// RolledBack is the error to return for a failed COMMIT whose answer
// proves the server rolled the transaction back (see rollbacks), and nil
// for any other.
func RolledBack(err error) error {
	why, ok := rollbacks[SQLState(err)]
	if !ok {
		return nil
	}
	return fmt.Errorf("commit refused, nothing committed (%s): %w", why, err)
}
