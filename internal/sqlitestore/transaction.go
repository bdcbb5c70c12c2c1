package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"leases/internal/outcome"
)

// inTransaction runs fn in one BEGIN IMMEDIATE transaction (the DSN's
// _txlock) and commits only if fn succeeds. Its error says which of three
// things happened (see leases' sentinel errors): fn refused; something
// failed before COMMIT was sent, so nothing changed; or the commit failed,
// so the outcome is unknown (ErrOutcomeUnknown), and the store then
// refuses every later operation (ErrReopenRequired).
func (s *Store) inTransaction(ctx context.Context, fn func(*sql.Tx) error) error {
	if err := s.usable(); err != nil {
		return err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return outcome.BeforeCommit(ctx, fmt.Errorf("begin: %w", err))
	}
	if err := s.checkFiles(); err != nil {
		return errors.Join(err, tx.Rollback())
	}
	if err := fn(tx); err != nil {
		return outcome.BeforeCommit(ctx, errors.Join(err, ignoreDone(tx.Rollback())))
	}
	// A context that ended before COMMIT is sent ends the transaction
	// here, with a known outcome: nothing changed. (database/sql would
	// otherwise race its own rollback against the commit.)
	if ctx.Err() != nil {
		return outcome.BeforeCommit(ctx, errors.Join(errors.New("not committed"), ignoreDone(tx.Rollback())))
	}
	beforeCommit()
	if err := tx.Commit(); err != nil {
		if rolledBack(ctx, tx, err) {
			return outcome.BeforeCommit(ctx, fmt.Errorf("not committed: %w", err))
		}
		// The commit was sent: SQLite may have written the change to the
		// write-ahead log before it failed, and whether that counts
		// depends on what the next process to open the file finds.
		err = outcome.Unknown(ctx, fmt.Errorf("commit failed: %w", err))
		s.failed.CompareAndSwap(nil, &err)
		return err
	}
	return nil
}

// beforeCommit runs between the last look at the context and the
// commit; a test makes the context end there.
var beforeCommit = func() {}

// rolledBack reports whether tx's commit, which failed with err, is known
// to have changed nothing because the context ended first: database/sql
// never sent it (outcome.CommitNotSent), or modernc.org/sqlite, which
// answers the context's error when the context ended while its COMMIT
// waited or ran, interrupted it and rolled the transaction back (its
// tx.Commit). Taken for an unknown outcome, such a commit (a session's
// renewal cut off by the session's own end, say) would make the whole
// store refuse everything until it is reopened, and end every other
// session of the process with it.
func rolledBack(ctx context.Context, tx *sql.Tx, err error) bool {
	return outcome.CommitNotSent(ctx, tx, err) || (ctx.Err() != nil && errors.Is(err, ctx.Err()))
}

// usable refuses every operation once a commit's outcome was unknown:
// this process's view of the file may then differ from the file.
func (s *Store) usable() error {
	if failed := s.failed.Load(); failed != nil {
		return fmt.Errorf("%w: an earlier commit's outcome is unknown (%v)", ErrReopenRequired, *failed)
	}
	return nil
}

func ignoreDone(err error) error {
	if errors.Is(err, sql.ErrTxDone) {
		return nil
	}
	return err
}
