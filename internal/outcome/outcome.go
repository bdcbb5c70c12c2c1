// Package outcome says, in the error an operation returns, which of the
// three kinds of package leases happened when it did not refuse: a
// failure before commit (nothing changed), or an unknown outcome (the
// commit was sent, and may have taken effect), each also matching the
// context's end when that is what stopped it. Refusals are decided, and
// said, by package internal/rules; every backend says the other two kinds
// through this package.
package outcome

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"leases"
)

// BeforeCommit marks err, a failure before anything that could change the
// store was sent, as caused by the context when the context has ended, so
// that errors.Is(err, context.Canceled) holds whatever the interrupted
// call said. A refusal stays a refusal: it was decided on what the store
// held.
func BeforeCommit(ctx context.Context, err error) error {
	if leases.IsRefusal(err) || !Ended(ctx) {
		return err
	}
	return fmt.Errorf("cancelled before commit, nothing changed: %w", WithContext(ctx, err))
}

// Unknown is the error of a change that was sent and failed: whether it
// took effect is unknown (leases.ErrOutcomeUnknown). It matches the
// context's end too when that cut it off.
func Unknown(ctx context.Context, err error) error {
	return fmt.Errorf("%w: %w", leases.ErrOutcomeUnknown, WithContext(ctx, err))
}

// WithContext wraps err with the context's error and cause when the
// context has ended and err does not say so already: a driver that
// answers a statement cut off by the context's end with the context's
// own error (pgx does) loses its cause, a session's end say, which the
// caller needs to tell why.
func WithContext(ctx context.Context, err error) error {
	if !Ended(ctx) {
		return err
	}
	ctxErr := ctx.Err()
	cause := context.Cause(ctx)
	switch {
	case errors.Is(err, ctxErr) && errors.Is(err, cause):
		return err
	case errors.Is(err, ctxErr):
		return fmt.Errorf("%w (%w)", err, cause)
	case !errors.Is(cause, ctxErr):
		return fmt.Errorf("%w (%w): %w", ctxErr, cause, err)
	}
	return fmt.Errorf("%w: %w", ctxErr, err)
}

// Ended reports whether ctx has ended. A context whose deadline has
// passed has ended even when its timer has not fired yet, and Ended then
// waits for the timer, so that ctx.Err and context.Cause say so: a server
// that takes the caller's deadline from the request (etcd, from gRPC's
// timeout) answers at that deadline with its own timeout, and on a busy
// machine its answer can reach the caller before the caller's timer has
// ended the caller's context.
func Ended(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	if deadline, ok := ctx.Deadline(); !ok || time.Now().Before(deadline) {
		return false
	}
	<-ctx.Done()
	return true
}

// CommitNotSent reports, for tx whose Commit failed with err, whether
// database/sql never handed the COMMIT to the driver because ctx ended:
// it rolled the transaction back itself (sql.ErrTxDone), or refused to
// send the commit and left the transaction open, which CommitNotSent then
// rolls back (a rollback that still finds it open). Nothing committed
// then. Once the commit was sent, an error is no proof of anything,
// whatever it says: a driver may answer ctx's end with ctx's own error
// after the COMMIT went out (pgx does), and the server may commit it.
func CommitNotSent(ctx context.Context, tx *sql.Tx, err error) bool {
	rollback := tx.Rollback()
	return ctx.Err() != nil && (errors.Is(err, sql.ErrTxDone) || !errors.Is(rollback, sql.ErrTxDone))
}
