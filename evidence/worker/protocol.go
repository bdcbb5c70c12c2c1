package worker

import (
	"context"
	"errors"
	"slices"

	"leases"
	"leases/evidence/backend"
	"leases/sqlite"
)

// Operations a controller can ask of a worker, one JSON line each.
const (
	opAcquire      = "acquire"
	opWrite        = "write"
	opGuardedWrite = "guarded-write"
	opFence        = "fence"
	opRead         = "read"
	opRenew        = "renew"
	opRelease      = "release"
	opSession      = "session"       // start a session on the worker's own clock
	opClock        = "clock"         // move the worker's clock
	opSessionWrite = "session-write" // check the session, then write with its epoch
	opCallTool     = "call-tool"     // call the tool server over HTTP with a lease's headers
	opExit         = "exit"
	opLeave        = "leave" // a pool's worker: end the assignment, keep the process (Pool)
)

// request is one command from the controller to a worker.
type request struct {
	Op       string           `json:"op"`
	Resource string           `json:"resource,omitempty"`
	Holder   string           `json:"holder,omitempty"`
	Tick     int64            `json:"tick,omitempty"`
	TTL      int64            `json:"ttl,omitempty"`
	Margin   int64            `json:"margin,omitempty"` // session
	Epoch    int64            `json:"epoch,omitempty"`
	Value    string           `json:"value,omitempty"`
	Receiver backend.Receiver `json:"receiver,omitempty"`
	Lease    *leases.Lease    `json:"lease,omitempty"` // renew, release, guarded write
	URL      string           `json:"url,omitempty"`   // call-tool
	Key      string           `json:"key,omitempty"`   // call-tool: the operation key
}

// reply is a worker's answer: its pid once at start, then one reply per
// request. Refused is set when an acquire was refused (the lease is held),
// which is an outcome, not a failure; Error is a failure, and Sentinels
// names the sentinel errors it matched in the worker, so that errors.Is
// still works on this side of the pipe. Ended says that the worker's
// session has ended, and why. Paused comes only from a test binary that
// holds a transaction open on purpose: the worker will not answer again
// and is waiting to be killed.
type reply struct {
	PID       int                 `json:"pid,omitempty"`
	Address   string              `json:"address,omitempty"` // the tool server's, with its pid
	Lease     *leases.Lease       `json:"lease,omitempty"`
	Refused   string              `json:"refused,omitempty"`
	Write     *leases.WriteResult `json:"write,omitempty"`
	Read      *readReply          `json:"read,omitempty"`
	Ended     string              `json:"ended,omitempty"`
	Tool      *ToolAnswer         `json:"tool,omitempty"` // call-tool: the tool's answer
	Lost      string              `json:"lost,omitempty"` // call-tool: no answer came, and why
	Paused    string              `json:"paused,omitempty"`
	Error     string              `json:"error,omitempty"`
	Sentinels []string            `json:"sentinels,omitempty"`
}

// readReply is what a worker found at the receiver.
type readReply struct {
	Found  bool          `json:"found"`
	Record leases.Record `json:"record"`
}

// sentinels are the errors whose identity crosses the pipe, by name.
var sentinels = map[string]error{
	"invalid-input":     leases.ErrInvalidInput,
	"tick-backwards":    leases.ErrTickBackwards,
	"lease-held":        leases.ErrLeaseHeld,
	"lease-expired":     leases.ErrLeaseExpired,
	"not-holder":        leases.ErrNotHolder,
	"database-moved":    sqlite.ErrDatabaseMoved,
	"outcome-unknown":   leases.ErrOutcomeUnknown,
	"reopen-required":   sqlite.ErrReopenRequired,
	"context-canceled":  context.Canceled,
	"deadline-exceeded": context.DeadlineExceeded,
}

// failure is the reply for err: its message and the sentinels it matches.
func failure(err error) reply {
	r := reply{Error: err.Error()}
	for name, sentinel := range sentinels {
		if errors.Is(err, sentinel) {
			r.Sentinels = append(r.Sentinels, name)
		}
	}
	slices.Sort(r.Sentinels)
	return r
}

// remoteError is a worker's error on the controller's side: the worker's
// message, and the sentinels it matched there.
type remoteError struct {
	msg       string
	sentinels []string
}

// Error is the worker's message.
func (e remoteError) Error() string { return e.msg }

// Is reports whether the worker's error matched target.
func (e remoteError) Is(target error) bool {
	for _, name := range e.sentinels {
		if sentinels[name] == target {
			return true
		}
	}
	return false
}
