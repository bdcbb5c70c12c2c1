package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"leases"
	"leases/internal/sqltx"
)

// inTransaction runs fn in one BEGIN IMMEDIATE transaction (the DSN's
// _txlock) and commits only if fn succeeds. Its error says which of three
// things happened (see leases' sentinel errors): fn refused; something
// failed before COMMIT was sent, so nothing changed; or the commit failed,
// so the outcome is unknown (ErrOutcomeUnknown), and the store then
// refuses every later operation (ErrReopenRequired).
func (s *Store) inTransaction(ctx context.Context, fn func(*sql.Tx) error) error {
	return s.run(ctx, nil, func(tx *sql.Tx) (bool, error) { return true, fn(tx) })
}

// run is inTransaction for a transaction that may decide not to commit,
// with opts; sqltx.Run classifies its outcome.
func (s *Store) run(ctx context.Context, opts *sql.TxOptions, fn func(*sql.Tx) (bool, error)) error {
	if err := s.usable(); err != nil {
		return err
	}
	err := sqltx.Run(ctx, s.db, sqltx.Options{Tx: opts, Known: s.known, Step: step}, func(tx *sql.Tx) (bool, error) {
		if err := s.checkFiles(); err != nil {
			return false, err
		}
		return fn(tx)
	})
	if errors.Is(err, leases.ErrOutcomeUnknown) {
		// The commit was sent: SQLite may have written the change to the
		// write-ahead log before it failed, and whether that counts
		// depends on what the next process to open the file finds.
		s.failed.CompareAndSwap(nil, &err)
	}
	return err
}

// beforeCommit runs between the last look at the context and the
// commit; a test makes the context end there.
var beforeCommit = func() {}

func step(_ context.Context, name string) {
	if name == "commit" {
		beforeCommit()
	}
}

// known says of a failed COMMIT whether it is known to have changed
// nothing: the check at the commit of a tenure's transaction refused it
// (see atCommit), or modernc.org/sqlite, which answers the context's
// error when the context ended while its COMMIT waited or ran,
// interrupted it and rolled the transaction back (its tx.Commit). Taken
// for an unknown outcome, such a commit (a session's renewal cut off by
// the session's own end, say) would make the whole store refuse
// everything until it is reopened, and end every other session of the
// process with it.
func (s *Store) known(ctx context.Context, err error) error {
	if refused := s.refusedAtCommit(err); refused != nil {
		return refused
	}
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return fmt.Errorf("%w: %w", sqltx.ErrNotCommitted, err)
	}
	return nil
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
