package session

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"leases"
)

// EventKind says what happened to a session.
type EventKind int

const (
	// Granted: the lease was acquired and the session began.
	Granted EventKind = iota + 1
	// Renewed: a renewal was confirmed and the deadline moved.
	Renewed
	// RenewalFailed: a renewal failed in a way a retry may mend (the
	// store could not be reached, or its outcome is unknown); the
	// deadline stands and the session tries again. Err says why and
	// matches ErrTransient (and leases.ErrOutcomeUnknown when the outcome
	// is unknown). A definite loss is no RenewalFailed: it is the Ended
	// event.
	RenewalFailed
	// Ended: the session ended. Err says why, matches ErrEnded, and tells
	// a definite loss (ErrLost, ErrDeadline) from a Close (ErrClosed) and
	// a store that can renew no more (leases.ErrStoreUnusable); EndReason
	// names it.
	Ended
)

// String names the kind.
func (k EventKind) String() string {
	switch k {
	case Granted:
		return "granted"
	case Renewed:
		return "renewed"
	case RenewalFailed:
		return "renewal failed"
	case Ended:
		return "ended"
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// Event is one thing that happened to a session, as Options.OnEvent gets
// it.
type Event struct {
	Kind     EventKind
	Resource string
	Holder   string
	Epoch    int64
	// Deadline is the session's deadline after the event.
	Deadline time.Time
	// Err is why a renewal failed or the session ended; nil otherwise.
	Err error
}

// report logs what happened at the level an operator needs and passes
// it to the hook; when neither would see it, it costs nothing more.
func (s *Session) report(kind EventKind, err error) {
	level, msg := levelOf(kind, err)
	if s.set.onEvent == nil && !s.set.log.Enabled(s.values, level) {
		return
	}
	s.emit(s.event(kind, err), level, msg)
}

// levelOf is the log level and message of an event of kind with err: a
// transient failure and every end but the caller's own are worth a
// warning, and their messages tell a failure the session retries from a
// loss.
func levelOf(kind EventKind, err error) (slog.Level, string) {
	switch kind {
	case Renewed:
		return slog.LevelDebug, "lease renewed"
	case RenewalFailed:
		return slog.LevelWarn, "lease renewal failed, retrying until the deadline"
	case Ended:
		switch EndReason(err) {
		case "released", "cancelled":
			return slog.LevelInfo, "lease session closed"
		case "lost":
			return slog.LevelWarn, "lease lost"
		case "deadline":
			return slog.LevelWarn, "lease session passed its deadline"
		}
		return slog.LevelWarn, "lease session ended"
	}
	return slog.LevelInfo, "lease granted"
}

// emit logs ev at level, with msg, and passes it to the hook. A failed
// renewal's failure says transient or outcome_unknown; an end's reason
// is EndReason's.
func (s *Session) emit(ev Event, level slog.Level, msg string) {
	attrs := []slog.Attr{
		slog.String("resource", ev.Resource), slog.String("holder", ev.Holder),
		slog.Int64("epoch", ev.Epoch), slog.Time("deadline", ev.Deadline),
	}
	switch {
	case ev.Kind == RenewalFailed && errors.Is(ev.Err, leases.ErrOutcomeUnknown):
		attrs = append(attrs, slog.String("failure", "outcome_unknown"))
	case ev.Kind == RenewalFailed:
		attrs = append(attrs, slog.String("failure", "transient"))
	case ev.Kind == Ended:
		attrs = append(attrs, slog.String("reason", EndReason(ev.Err)))
	}
	if ev.Err != nil {
		attrs = append(attrs, slog.String("error", ev.Err.Error()))
	}
	s.set.log.LogAttrs(s.values, level, msg, attrs...)
	if s.set.onEvent != nil {
		s.set.onEvent(ev)
	}
}
