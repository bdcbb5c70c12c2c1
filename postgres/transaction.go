package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"leases/internal/sqltx"
)

// errLostInsert reports that a resource's first row, decided on while
// the resource had none, met a row that another transaction inserted
// meanwhile: nothing was written, and the decision is made again, in a
// new transaction, on that row.
var errLostInsert = errors.New("another transaction inserted the resource's first row first")

// maxLostInserts bounds the decisions made again after errLostInsert. A
// row is never deleted, so the second decision finds it; only rows
// deleted by hand could make it happen again.
const maxLostInserts = 3

// inTx runs fn in one transaction of the store's isolation level, and
// commits it when fn says so (a decision that changes nothing rolls
// back). A transaction that PostgreSQL refused to commit as it stood (a
// serialization failure or a deadlock) is tried again, up to the store's
// Retries, and one whose first row lost a race (errLostInsert) too: each
// try is a new transaction that committed nothing before. The error says
// which of three things happened: fn refused (a refusal, see
// leases.IsRefusal); something failed before COMMIT was sent, so nothing
// changed; or the COMMIT was sent and failed, so the outcome is unknown
// (leases.ErrOutcomeUnknown).
func (s *Store) inTx(ctx context.Context, fn func(tx *sql.Tx) (commit bool, err error)) error {
	lost, failed := 0, 0
	for {
		err := once(ctx, s.db, &sql.TxOptions{Isolation: s.isolation}, fn)
		switch {
		case err == nil || ctx.Err() != nil:
			return err
		case errors.Is(err, errLostInsert) && lost < maxLostInserts:
			lost++
		case IsSerializationFailure(err) && failed < s.retries:
			failed++
		case IsSerializationFailure(err):
			return fmt.Errorf("tried %d times: %w", failed+1, err)
		default:
			return err
		}
	}
}

// once runs fn in one transaction of db and commits it when fn says so,
// telling a refusal, a failure before commit and an unknown outcome
// apart (see inTx and sqltx.Run). It makes no second try.
func once(ctx context.Context, db *sql.DB, opts *sql.TxOptions, fn func(tx *sql.Tx) (commit bool, err error)) error {
	return sqltx.Run(ctx, db, sqltx.Options{Tx: opts, Known: known, Step: step}, fn)
}

// known says of a failed COMMIT whether PostgreSQL's answer proves that
// it rolled the transaction back: a serialization failure, a deadlock, a
// session it ended for idling in the transaction (sqltx.RolledBack), or
// a lease that was no longer live when the transaction committed
// (notLiveAtCommit). The chaos test's guarded variant saw a row committed
// whose COMMIT pgx had answered with ctx's error (held past the
// session's end): any other answer proves nothing.
func known(_ context.Context, err error) error {
	if refused := notLiveAtCommit(err); refused != nil {
		return refused
	}
	return sqltx.RolledBack(err)
}

// IsSerializationFailure reports whether err is PostgreSQL's answer that
// a transaction could not go on as it stood and was rolled back:
// SQLSTATE 40001 (serialization_failure, under REPEATABLE READ and
// SERIALIZABLE) or 40P01 (deadlock_detected). Nothing of that
// transaction is committed, and it may be tried again as a whole. It
// reads the SQLSTATE of driver errors that have a SQLState() string
// method (pgx's *pgconn.PgError and lib/pq's *pq.Error have).
func IsSerializationFailure(err error) bool {
	code := sqltx.SQLState(err)
	return code == "40001" || code == "40P01"
}

// stepKey is the context key of a hook that a test sets to run before
// each step of a store's transaction ("begin", "lock", "write", "commit",
// "rollback"): the interleaving tests hold each step until they let it
// go. Nothing else sets it.
type stepKey struct{}

func step(ctx context.Context, name string) {
	if hook, ok := ctx.Value(stepKey{}).(func(string)); ok {
		hook(name)
	}
}
