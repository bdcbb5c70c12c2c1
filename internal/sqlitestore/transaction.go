package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"leases"
	"leases/internal/rules"
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
		return beforeCommit(ctx, fmt.Errorf("begin: %w", err))
	}
	if err := s.checkFiles(); err != nil {
		return errors.Join(err, tx.Rollback())
	}
	if err := fn(tx); err != nil {
		return beforeCommit(ctx, errors.Join(err, ignoreDone(tx.Rollback())))
	}
	// A context that ended before COMMIT is sent ends the transaction
	// here, with a known outcome: nothing changed. (database/sql would
	// otherwise race its own rollback against the commit.)
	if ctx.Err() != nil {
		return beforeCommit(ctx, errors.Join(errors.New("not committed"), ignoreDone(tx.Rollback())))
	}
	if err := tx.Commit(); err != nil {
		// The commit was sent: SQLite may have written the change to the
		// write-ahead log before it failed, and whether that counts
		// depends on what the next process to open the file finds.
		err = fmt.Errorf("%w: commit failed: %w", leases.ErrOutcomeUnknown, withContext(ctx, err))
		s.failed.CompareAndSwap(nil, &err)
		return err
	}
	return nil
}

// usable refuses every operation once a commit's outcome was unknown:
// this process's view of the file may then differ from the file.
func (s *Store) usable() error {
	if failed := s.failed.Load(); failed != nil {
		return fmt.Errorf("%w: an earlier commit's outcome is unknown (%v)", leases.ErrReopenRequired, *failed)
	}
	return nil
}

// beforeCommit marks err, a failure before COMMIT was sent, as caused by
// the context when the context has ended, so that errors.Is(err,
// context.Canceled) holds whatever the interrupted statement said. A
// refusal stays a refusal: it was decided on what the transaction read.
func beforeCommit(ctx context.Context, err error) error {
	if ctx.Err() == nil || rules.IsRefusal(err) {
		return err
	}
	return fmt.Errorf("cancelled before commit, nothing changed: %w", withContext(ctx, err))
}

// withContext wraps err with the context's error and cause when the
// context has ended and err does not say so already.
func withContext(ctx context.Context, err error) error {
	ctxErr := ctx.Err()
	if ctxErr == nil || errors.Is(err, ctxErr) {
		return err
	}
	if cause := context.Cause(ctx); cause != ctxErr {
		return fmt.Errorf("%w (%w): %w", ctxErr, cause, err)
	}
	return fmt.Errorf("%w: %w", ctxErr, err)
}

func ignoreDone(err error) error {
	if errors.Is(err, sql.ErrTxDone) {
		return nil
	}
	return err
}
