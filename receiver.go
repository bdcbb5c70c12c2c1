package leases

import "context"

// Mode says whether a receiver checks the epoch that comes with a write.
type Mode string

const (
	// Fenced receivers compare the incoming epoch with the stored one and
	// apply the outcomes documented on [Outcome].
	Fenced Mode = "fenced"
	// Unfenced receivers store whatever comes last, epoch and all, without
	// comparing: the baseline that shows what a lease alone does not stop.
	// They keep their records apart from the fenced receiver's, so that
	// an unfenced write can never lower a fence.
	Unfenced Mode = "unfenced"
)

// Outcome is what a receiver did with one write.
type Outcome string

const (
	// Accepted: the write was stored. For a fenced receiver the incoming
	// epoch was higher than the stored one, or nothing was stored yet.
	Accepted Outcome = "accepted"
	// Replay: same epoch and same value as stored; nothing changed. A
	// retried write is safe.
	Replay Outcome = "replay"
	// Conflict: same epoch, different value; rejected, nothing changed.
	// One replacement value per resource per epoch.
	Conflict Outcome = "conflict"
	// Stale: the incoming epoch is below the stored one; rejected, nothing
	// changed. This is the fence. A call that returns an error for it
	// returns one matching ErrStale.
	Stale Outcome = "stale"
	// NotLive: a guarded receiver's answer when the writer's lease is not
	// the authority's live lease for the resource at the write's tick (it
	// expired, was released, or a newer epoch was granted); rejected,
	// nothing changed. A call that returns an error for it returns one
	// matching ErrNotLive.
	NotLive Outcome = "not-live"
	// InProgress: an operation with the same key at the same epoch has
	// begun and not finished (package leases/ops: a pending record, or a
	// first call still running); nothing was done. Ask again later: the
	// record will answer. A pending record that is never completed
	// answers InProgress for good: its effect is unknown, and is never
	// repeated.
	InProgress Outcome = "in progress"
)

// Stored reports whether the write changed the receiver's record.
func (o Outcome) Stored() bool { return o == Accepted }

// Record is what a receiver holds for one resource.
type Record struct {
	// Epoch is the highest epoch the receiver has committed for the
	// resource: the fence. Unfenced receivers store the last write's.
	Epoch int64 `json:"epoch"`
	// ValueEpoch is the epoch the stored value came with; it is below
	// Epoch only after a Fence of a newer epoch, and 0 while no value
	// has been stored.
	ValueEpoch int64 `json:"value_epoch"`
	// Value is the stored value.
	Value string `json:"value"`
}

// WriteResult is the outcome of one write and the receiver's record right
// after it, read in the same transaction.
type WriteResult struct {
	Outcome Outcome `json:"outcome"`
	Record  Record  `json:"record"`
}

// Receiver is the shared resource that lease holders write to. It keeps
// its own records and never reads the authority's: the only thing it
// knows about leases is the epochs that writers bring. Until a newer
// holder's epoch reaches it, a stale holder's write is accepted; that gap
// is part of the contract, and [Receiver.Fence] narrows it.
type Receiver interface {
	// Mode reports whether the receiver is fenced.
	Mode() Mode

	// Write offers value for resource, tagged with the writer's epoch. The
	// comparison with the stored epoch and the store itself are one
	// transaction, so no other write can slip between them.
	Write(ctx context.Context, resource string, epoch int64, value string) (WriteResult, error)

	// Fence raises the fence of a fenced receiver to epoch without a
	// value (it writes the receiver's record), so that from now on every
	// write with a lower epoch is stale. A new lease
	// holder calls it right after acquiring and before it reads or acts:
	// this closes the gap in which the old holder's write is still
	// accepted. The stored value is kept (the new holder reads it); the
	// first write at the observed epoch is accepted. The outcome is
	// Accepted when the fence rose, Replay when it was already at epoch,
	// and Stale when a higher epoch was committed before: the caller has
	// been superseded and must not act. An unfenced receiver refuses it
	// with ErrInvalidInput.
	Fence(ctx context.Context, resource string, epoch int64) (WriteResult, error)

	// Read returns the record stored for resource; found is false when
	// nothing has been written yet.
	Read(ctx context.Context, resource string) (record Record, found bool, err error)
}

// GuardedReceiver is a receiver that asks the authority: a write is
// accepted only if, in the same transaction, the writer's lease is still
// the authority's live lease for the resource at the write's tick, and
// then only as a fenced receiver would accept it. It closes the gap that
// a fenced receiver leaves, but only because the resource and the
// authority live in one transactional store: the resource is coupled to
// the authority, and every write pays for reading the lease.
type GuardedReceiver interface {
	// Write offers value for held's resource at tick now. The outcome is
	// NotLive when held is not the live lease at now; otherwise as for a
	// fenced receiver's Write with held's epoch.
	Write(ctx context.Context, held Lease, now int64, value string) (WriteResult, error)

	// Read returns the record stored for resource; found is false when
	// nothing has been written yet.
	Read(ctx context.Context, resource string) (record Record, found bool, err error)
}
