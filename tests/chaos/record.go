package chaos

import (
	"context"
	"errors"

	"leases"
	"leases/session"
)

// Record is one line of a worker's standard output.
type Record struct {
	// Kind is what the line is:
	//   - "call": an operation invoked (ID pairs it with its "ret");
	//   - "ret": its return;
	//   - "commit": a transaction about to send COMMIT (ID is the tx's);
	//   - "at": the worker reached Point and waits for the controller's
	//     answer on its standard input ("go" or "stop"): "checked" (after
	//     a Check that answered nil), "fenced" (admitted, its row
	//     inserted, before COMMIT), "sending" (on PostgreSQL, the COMMIT
	//     about to be written to the server; answered AnswerCut, the
	//     transaction's context ends once it is written), "committing" (inside
	//     SQLite's COMMIT; on PostgreSQL, the COMMIT written to the
	//     server),
	//     "lessor-locked" (inside an acquire, holding the lessor's write
	//     lock), "granted" (the guarded variant: granted, the tenure not
	//     begun; Resource and Epoch say which), "grant-sent" (on etcd: an
	//     acquire's transaction that writes, about to be sent; the
	//     answer may be AnswerGiveUp);
	//   - "done": a session's Done closed;
	//   - "lessor-commit": a transaction on the lessor's file began to
	//     commit (SQLite's commit hook), or a transaction that writes was
	//     sent to an etcd member (a gRPC interceptor of the client);
	//   - "starved": from At to Until the worker's own reference timer
	//     fired Late nanoseconds late in all: the process had no CPU for
	//     that long (the machine was busy, or the process stopped), and no
	//     timer of its could fire. A stall is a span of its own, Late
	//     long; smaller lateness is spread over its span.
	Kind  string `json:"k"`
	ID    int64  `json:"id,omitempty"`
	Op    string `json:"op,omitempty"`
	Point string `json:"point,omitempty"`

	// T is the wall clock in nanoseconds since the Unix epoch when the
	// line was made (time.Now, which every process on the machine reads
	// alike); Tick is clock.Wall's tick (milliseconds) at the same moment,
	// the clock the worker's lessor and sessions count on.
	T    int64 `json:"t"`
	Tick int64 `json:"tick"`

	// What a call was given.
	Holder   string `json:"holder,omitempty"`
	Resource string `json:"resource,omitempty"`
	Epoch    int64  `json:"epoch,omitempty"`
	Now      int64  `json:"now,omitempty"`
	TTL      int64  `json:"ttl,omitempty"`
	OpID     string `json:"opid,omitempty"`
	// ServerTime says that the server's clock decides the call's tick
	// (postgres.ServerClock): Now is unknown, not zero. On a "tx", that
	// the transaction is admitted by the server-clock guard (the store's Tenure).
	ServerTime bool `json:"server_time,omitempty"`

	// What it returned: Result (see resultOf), the lease it granted,
	// renewed or was refused by, the sequence number a transaction's row
	// got, and the error's text.
	Result string        `json:"result,omitempty"`
	Lease  *leases.Lease `json:"lease,omitempty"`
	Last   int64         `json:"last,omitempty"` // a backwards refusal's last tick
	Seq    int64         `json:"seq,omitempty"`
	Err    string        `json:"err,omitempty"`
	// Committed is a resolve's answer (Result ok): the transaction
	// whose outcome was unknown committed, or (false) it did not.
	Committed bool `json:"committed,omitempty"`
	// CtxDone says, for a failed Wait, whether the worker's own context
	// (the caller's) had ended.
	CtxDone bool `json:"ctx_done,omitempty"`
	// Released says, for a Wait that returned a *session.OutcomeError
	// (its Lease is then the lease in doubt), that the error says the
	// lease is not held.
	Released bool `json:"released,omitempty"`

	// For "done": the session's deadline (a tick) when Done closed; for
	// a Wait's "ret", the deadline of the session it returned.
	Deadline int64 `json:"deadline,omitempty"`
	// For "starved": how late the reference timer fired in all from At to
	// Until, in nanoseconds. For "done", At is when Done was seen closed
	// (and Now the tick then), taken before the line waits for the output.
	Late  int64 `json:"late,omitempty"`
	At    int64 `json:"at,omitempty"`
	Until int64 `json:"until,omitempty"`
	// For "at" "sending" and "committing" on PostgreSQL: the pid of the
	// server's backend that runs the COMMIT.
	Pid int `json:"pid,omitempty"`
}

// The results an operation's "ret" can carry.
const (
	resultOK   = "ok"
	resultNone = "none" // a holder query that found no live lease
	resultHeld = "held"
	// resultQueued is a Lessor's refusal of a free lease kept for a
	// waiter ahead in its line (leases.HeldError.Queued): it changes no
	// lease, and the history leaves it out of the model's check.
	resultQueued     = "queued"
	resultBackwards  = "backwards"
	resultNotHolder  = "not-holder"
	resultExpired    = "expired"
	resultSuperseded = "superseded"
	resultNotLive    = "not-live" // leases.ErrNotLive: the guard found the lease not live; no row
	resultInvalid    = "invalid"
	resultEnded      = "ended"      // the session ended (Check, or a transaction under its context)
	resultCanceled   = "canceled"   // the caller's context ended
	resultUnknown    = "unknown"    // leases.ErrOutcomeUnknown: may or may not have taken effect
	resultFailed     = "failed"     // a failure before commit: nothing changed
	resultStopped    = "stopped"    // the controller told the worker to stop there
	resultKilled     = "killed"     // no "ret": the process was killed during the call
	resultUnresolved = "unresolved" // not returned, and not killed either: a bug of the harness
)

// errStop is what a worker's transaction returns when the controller
// answers "stop" inside it: it rolls back.
var errStop = errors.New("stopped by the controller")

// resultOf names what err says happened. The order matters:
// leases.ErrStale matches leases.ErrNotHolder, and an ended session
// matches the context errors and carries the reason it ended.
func resultOf(err error) string {
	var held *leases.HeldError
	switch {
	case err == nil:
		return resultOK
	case errors.Is(err, errStop):
		return resultStopped
	case errors.Is(err, leases.ErrOutcomeUnknown):
		return resultUnknown
	case errors.Is(err, leases.ErrStale):
		return resultSuperseded
	case errors.Is(err, leases.ErrNotLive):
		// Before the refusals it also matches (expired, not the holder).
		return resultNotLive
	case errors.Is(err, session.ErrEnded):
		// Before the refusals: a transaction cut off by the session's end
		// carries why the session ended, a refused renewal perhaps.
		return resultEnded
	case errors.As(err, &held) && held.Queued:
		return resultQueued
	case errors.Is(err, leases.ErrLeaseHeld):
		return resultHeld
	case errors.Is(err, leases.ErrTickBackwards):
		return resultBackwards
	case errors.Is(err, leases.ErrNotHolder):
		return resultNotHolder
	case errors.Is(err, leases.ErrLeaseExpired):
		return resultExpired
	case errors.Is(err, leases.ErrInvalidInput):
		return resultInvalid
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return resultCanceled
	}
	return resultFailed
}
