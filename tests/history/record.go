package history

import (
	"context"
	"errors"

	"leases"
	"leases/session"
)

// Record is one entry of a history: a call, its return, or another event
// of a worker, stamped with the moment it was made (T) and the tick of
// the clock the calls count on (Tick). A worker process writes its own
// as JSON lines (the chaos test's); a controller that makes the calls on
// its workers' behalf writes theirs (the stress tests'). A Recorder
// makes them, and History.Add puts them together.
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
	//   - "killed": the controller killed the worker's process (written
	//     by the controller, at the moment the process was gone): the
	//     calls still open will never return;
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

	// T is when the record was made, on the history's one clock: in the
	// chaos test the wall clock in nanoseconds since the Unix epoch
	// (time.Now, which every process on the machine reads alike); in the
	// stress tests the controller's count of its sends, replies and
	// kills. Tick is the tick of the clock the calls count on at the same
	// moment: clock.Wall's (milliseconds) in the chaos test, the
	// controller's own in the stress tests.
	T    int64 `json:"t"`
	Tick int64 `json:"tick"`

	// What a call was given.
	Holder   string `json:"holder,omitempty"`
	Resource string `json:"resource,omitempty"`
	Epoch    int64  `json:"epoch,omitempty"`
	Now      int64  `json:"now,omitempty"`
	TTL      int64  `json:"ttl,omitempty"`
	OpID     string `json:"opid,omitempty"`
	// Value is what a receiver's write offers.
	Value string `json:"value,omitempty"`
	// ServerTime says that the server's clock decides the call's tick
	// (postgres.ServerClock): Now is unknown, not zero. On a "tx", that
	// the transaction is admitted by the server-clock guard (the store's Tenure).
	ServerTime bool `json:"server_time,omitempty"`

	// What it returned: Result (see ResultOf), the lease it granted,
	// renewed or was refused by (on a call: the lease it renews or
	// releases), the sequence number a transaction's row got, and the
	// error's text.
	Result string        `json:"result,omitempty"`
	Lease  *leases.Lease `json:"lease,omitempty"`
	Last   int64         `json:"last,omitempty"` // a backwards refusal's last tick
	Seq    int64         `json:"seq,omitempty"`
	Err    string        `json:"err,omitempty"`
	// What a receiver answered: a write's or fence's Outcome, and the
	// record it showed (Stored); a read's record, if Found.
	Outcome leases.Outcome `json:"outcome,omitempty"`
	Stored  *leases.Record `json:"stored,omitempty"`
	Found   bool           `json:"found,omitempty"`
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

	// For a "tool" call (Value names the server it went to, "http" or
	// "mcp"; OpID is its operation key): the tool, and on its return the
	// answer's body and, on a stale refusal, the newest epoch the server
	// said it had admitted.
	Tool   string `json:"tool,omitempty"`
	Body   string `json:"body,omitempty"`
	Newest int64  `json:"newest,omitempty"`
}

// The results an operation's "ret" can carry.
const (
	ResultOK   = "ok"
	ResultNone = "none" // a holder query that found no live lease
	ResultHeld = "held"
	// ResultQueued is a Lessor's refusal of a free lease kept for a
	// waiter ahead in its line (leases.HeldError.Queued): it changes no
	// lease, and the history leaves it out of the model's check.
	ResultQueued     = "queued"
	ResultBackwards  = "backwards"
	ResultNotHolder  = "not-holder"
	ResultExpired    = "expired"
	ResultSuperseded = "superseded"
	ResultNotLive    = "not-live" // leases.ErrNotLive: the guard found the lease not live; no row
	ResultInvalid    = "invalid"
	ResultEnded      = "ended"      // the session ended (Check, or a transaction under its context)
	ResultCanceled   = "canceled"   // the caller's context ended
	ResultUnknown    = "unknown"    // leases.ErrOutcomeUnknown: may or may not have taken effect
	ResultFailed     = "failed"     // a failure before commit: nothing changed
	ResultStopped    = "stopped"    // the controller told the worker to stop there (its transaction rolled back)
	ResultKilled     = "killed"     // no "ret": the process was killed during the call
	ResultUnresolved = "unresolved" // not returned, and not killed either: a bug of the harness
)

// ResultOf names what err says happened. The order matters:
// leases.ErrStale matches leases.ErrNotHolder, and an ended session
// matches the context errors and carries the reason it ended.
func ResultOf(err error) string {
	var held *leases.HeldError
	switch {
	case err == nil:
		return ResultOK
	case errors.Is(err, leases.ErrOutcomeUnknown):
		return ResultUnknown
	case errors.Is(err, leases.ErrStale):
		return ResultSuperseded
	case errors.Is(err, leases.ErrNotLive):
		// Before the refusals it also matches (expired, not the holder).
		return ResultNotLive
	case errors.Is(err, session.ErrEnded):
		// Before the refusals: a transaction cut off by the session's end
		// carries why the session ended, a refused renewal perhaps.
		return ResultEnded
	case errors.As(err, &held) && held.Queued:
		return ResultQueued
	case errors.Is(err, leases.ErrLeaseHeld):
		return ResultHeld
	case errors.Is(err, leases.ErrTickBackwards):
		return ResultBackwards
	case errors.Is(err, leases.ErrNotHolder):
		return ResultNotHolder
	case errors.Is(err, leases.ErrLeaseExpired):
		return ResultExpired
	case errors.Is(err, leases.ErrInvalidInput):
		return ResultInvalid
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return ResultCanceled
	}
	return ResultFailed
}

// HolderReturn is the "ret" of a holder query: the live lease, or none.
func HolderReturn(lease leases.Lease, live bool, err error) Record {
	if err == nil && !live {
		return Record{Result: ResultNone}
	}
	return LeaseReturn(lease, err)
}

// LeaseReturn is the "ret" of an authority's call: the lease it granted,
// renewed, would have granted (an unknown outcome), or was refused by,
// and a backwards refusal's last tick, where the error carries them.
func LeaseReturn(lease leases.Lease, err error) Record {
	r := Record{Result: ResultOf(err), Err: ErrText(err)}
	var held *leases.HeldError
	var behind *leases.BackwardsError
	switch {
	case errors.As(err, &held):
		r.Lease = &held.Live
	case errors.As(err, &behind):
		r.Last = behind.Last
	case (err == nil || r.Result == ResultUnknown) && lease.Epoch != 0:
		r.Lease = &lease
	}
	return r
}

// ErrText is err's text, or "" for nil.
func ErrText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
