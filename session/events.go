package session

import (
	"fmt"
	"log/slog"
	"time"
)

// EventKind says what happened to a session.
type EventKind int

const (
	// Granted: the lease was acquired and the session began.
	Granted EventKind = iota + 1
	// Renewed: a renewal was confirmed and the deadline moved.
	Renewed
	// RenewalFailed: a renewal failed without a refusal (the store could
	// not be reached, or its outcome is unknown); the deadline stands and
	// the session tries again. Err says why.
	RenewalFailed
	// Ended: the session ended. Err says why and matches ErrEnded.
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

// emit logs ev at the level an operator needs and passes it to the hook.
func (s *Session) emit(ev Event) {
	level, msg := slog.LevelInfo, "lease granted"
	switch ev.Kind {
	case Renewed:
		level, msg = slog.LevelDebug, "lease renewed"
	case RenewalFailed:
		level, msg = slog.LevelWarn, "lease renewal failed"
	case Ended:
		level, msg = slog.LevelInfo, "lease session ended"
		if !s.closing.Load() {
			level = slog.LevelWarn
		}
	}
	attrs := []slog.Attr{
		slog.String("resource", ev.Resource), slog.String("holder", ev.Holder),
		slog.Int64("epoch", ev.Epoch), slog.Time("deadline", ev.Deadline),
	}
	if ev.Err != nil {
		attrs = append(attrs, slog.String("error", ev.Err.Error()))
	}
	s.set.log.LogAttrs(s.values, level, msg, attrs...)
	if s.set.onEvent != nil {
		s.set.onEvent(ev)
	}
}
