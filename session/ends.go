package session

import (
	"context"
	"errors"
	"fmt"

	"leases"
)

// ErrEnded reports that a session has ended: its deadline passed, its
// lease was lost, or it was closed. The wrapped error says which: every
// end matches ErrEnded and, besides, one of ErrLost, ErrDeadline and
// ErrClosed, or leases.ErrStoreUnusable when the store can renew no more.
var ErrEnded = errors.New("session ended")

// The ends of a session, told apart with errors.Is; each matches ErrEnded.
// A session's Err, the cause of its Context (context.Cause) and the Err of
// its Ended event are the same error.
var (
	// ErrLost: the lease was lost, definitely: a renewal was refused (the
	// lease had expired, was released behind the session's back, or
	// another holder has it). The wrapped refusal says which
	// (leases.IsRefusal).
	ErrLost = fmt.Errorf("%w: the lease was lost", ErrEnded)
	// ErrDeadline: the deadline passed before a renewal was confirmed
	// (renewals kept failing, hung, or the process was paused): the
	// session stopped believing in the lease, which may still be live on
	// the store until it expires, but may be given to another holder
	// from then on.
	ErrDeadline = fmt.Errorf("%w: its deadline passed", ErrEnded)
	// ErrClosed: Close ended the session (Do and Lead call it once their
	// work has returned). When the context given to Close had ended (a
	// shutdown), the error also matches that context's error.
	ErrClosed = fmt.Errorf("%w: closed", ErrEnded)
)

// ErrTransient marks a renewal that failed in a way a retry may mend: the
// store could not be reached, or the renewal's outcome is unknown (then
// the error also matches leases.ErrOutcomeUnknown). The session still
// holds its lease until its deadline and tries again; it is the Err of a
// RenewalFailed event, never a session's end.
var ErrTransient = errors.New("session: renewal failed, to be retried")

// endError is a session's end: its own message, matching its kind (one
// of the ends above) and what caused it.
type endError struct {
	msg   string
	kind  error
	cause error // nil when nothing more is to be said
}

func (e *endError) Error() string { return e.msg }

func (e *endError) Unwrap() []error {
	if e.cause == nil {
		return []error{e.kind}
	}
	return []error{e.kind, e.cause}
}

// lost is the end of a session whose renewal was refused.
func lost(refusal error) error {
	return &endError{msg: fmt.Sprintf("%v: its renewal was refused: %v", ErrLost, refusal), kind: ErrLost, cause: refusal}
}

// closedBy is the end of a session that Close ended, with ctx, Close's
// context: when it had ended, the end says so and matches its error.
func closedBy(ctx context.Context) error {
	if ctx.Err() == nil {
		return ErrClosed
	}
	cause := ctxEnded(ctx)
	return &endError{msg: fmt.Sprintf("%v after its caller's context ended: %v", ErrClosed, cause), kind: ErrClosed, cause: cause}
}

// transient is a renewal's failure that the session retries.
func transient(err error) error {
	return &endError{msg: fmt.Sprintf("session: renewal failed, to be retried before the deadline: %v", err), kind: ErrTransient, cause: err}
}

// EndReason names why a session ended, from its error (Err, the cause of
// its Context, an Ended event's Err), as the metrics and the log name it:
// "released" (closed by its caller), "cancelled" (closed because the
// caller's context had ended: a shutdown), "lost", "deadline",
// "store_unusable", or "" for an error that is no session's end.
func EndReason(err error) string {
	switch {
	case errors.Is(err, ErrClosed) && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
		return "cancelled"
	case errors.Is(err, ErrClosed):
		return "released"
	case errors.Is(err, ErrLost):
		return "lost"
	case errors.Is(err, ErrDeadline):
		return "deadline"
	case errors.Is(err, ErrEnded) && errors.Is(err, leases.ErrStoreUnusable):
		return "store_unusable"
	}
	return ""
}
