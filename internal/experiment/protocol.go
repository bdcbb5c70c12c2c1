package experiment

import "leases"

// workerEnv selects the worker role when the program re-executes itself;
// its value is the path of the scenario's database.
const workerEnv = "LEASES_EXPERIMENT_WORKER_DB"

// Operations a controller can ask of a worker, one JSON line each.
const (
	opAcquire = "acquire"
	opWrite   = "write"
	opObserve = "observe"
	opRead    = "read"
	opRenew   = "renew"
	opRelease = "release"
	opExit    = "exit"
)

// request is one command from the controller to a worker.
type request struct {
	Op       string        `json:"op"`
	Resource string        `json:"resource,omitempty"`
	Holder   string        `json:"holder,omitempty"`
	Tick     int64         `json:"tick,omitempty"`
	TTL      int64         `json:"ttl,omitempty"`
	Epoch    int64         `json:"epoch,omitempty"`
	Value    string        `json:"value,omitempty"`
	Receiver leases.Mode   `json:"receiver,omitempty"`
	Lease    *leases.Lease `json:"lease,omitempty"` // renew, release
}

// reply is a worker's answer: its pid once at start, then one reply per
// request. Refused is set when an acquire was refused (the lease is held),
// which is an outcome, not a failure; Error is a failure. Paused comes only
// from a test binary that holds a transaction open on purpose: the worker
// will not answer again and is waiting to be killed.
type reply struct {
	PID     int                 `json:"pid,omitempty"`
	Lease   *leases.Lease       `json:"lease,omitempty"`
	Refused string              `json:"refused,omitempty"`
	Write   *leases.WriteResult `json:"write,omitempty"`
	Read    *readReply          `json:"read,omitempty"`
	Paused  string              `json:"paused,omitempty"`
	Error   string              `json:"error,omitempty"`
}

// readReply is what a worker found at the receiver.
type readReply struct {
	Found  bool          `json:"found"`
	Record leases.Record `json:"record"`
}
