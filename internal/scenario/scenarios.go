package scenario

import "leases"

// Def is one named schedule and the receiver it runs against.
type Def struct {
	Name        string
	Description string
	// Receiver is the receiver the workers write to: a leases.Mode, or
	// Guarded.
	Receiver leases.Mode
	Params   Parameters
	Schedule func(*script)
}

// Guarded names the guarded receiver where a scenario names its receiver.
const Guarded leases.Mode = "guarded"

// Scenario names, as they appear in results.json.
const (
	UnfencedReceiver                   = "unfenced-receiver"
	FencedReceiver                     = "fenced-receiver"
	ExpiryBeforeReceiverObservationGap = "expiry-before-receiver-observation-gap"
	// FenceBeforeActing goes beyond the seed: the remedy for the gap.
	FenceBeforeActing = "fence-before-acting"
)

// Every scenario uses the same resource, time-to-live and values, so that
// their steps can be compared line by line.
var (
	gapParams = Parameters{
		Resource: "shared-record",
		TTL:      3,
		ValueA:   "value-from-A",
		ValueB:   "value-from-B",
	}
	pausedHolderParams = Parameters{
		Resource: gapParams.Resource, TTL: gapParams.TTL, ValueA: gapParams.ValueA, ValueB: gapParams.ValueB,
		ConflictingValueB: "other-value-from-B",
	}
)

// Defs are the scenarios, in the order results.json lists them.
func Defs() []Def { return defs }

var defs = []Def{
	{
		Name: UnfencedReceiver,
		Description: "A acquires at tick 0 and pauses past its expiry; B is refused one tick before A's expiry, " +
			"acquires at the expiry tick, writes, resends, sends a different value, and exits; A resumes and writes " +
			"with its old epoch. The receiver does not compare epochs.",
		Receiver: leases.Unfenced, Params: pausedHolderParams, Schedule: pausedHolder,
	},
	{
		Name:        FencedReceiver,
		Description: "The same schedule against a receiver that compares epochs.",
		Receiver:    leases.Fenced, Params: pausedHolderParams, Schedule: pausedHolder,
	},
	{
		Name: ExpiryBeforeReceiverObservationGap,
		Description: "A acquires at tick 0 and pauses past its expiry; B acquires at the expiry tick but has not " +
			"written yet; A resumes and writes first, so the fenced receiver has not observed epoch 2; then B " +
			"writes, then A's old write arrives again.",
		Receiver: leases.Fenced, Params: gapParams, Schedule: expiryBeforeObservation,
	},
	{
		Name: FenceBeforeActing,
		Description: "Beyond the seed: the gap's schedule, but B records its epoch at the receiver (observe) right " +
			"after acquiring and before it reads or writes; A's old write then arrives and is rejected.",
		Receiver: leases.Fenced, Params: gapParams, Schedule: fenceBeforeActing,
	},
}

// pausedHolder is the seed's schedule: A commits its acquisition and
// pauses; B acquires at the exact expiry tick, writes and exits; A resumes
// and writes with its old epoch.
func pausedHolder(r *script) {
	a, b := r.start("A"), r.start("B")
	expiry := r.def.Params.TTL // A is granted at tick 0
	r.at(0).acquire(a)
	r.at(expiry - 1).acquire(b) // refused: A's lease is live until its expiry tick
	r.at(expiry).acquire(b)     // granted: A's lease has expired, B gets epoch 2
	r.write(b, r.def.Params.ValueB)
	r.write(b, r.def.Params.ValueB)            // a retried write: replay
	r.write(b, r.def.Params.ConflictingValueB) // a second value at epoch 2: conflict
	r.exit(b)
	r.write(a, r.def.Params.ValueA) // the paused holder resumes
	r.exit(a)
}

// expiryBeforeObservation is the gap: the new holder's epoch has not
// reached the receiver when the old holder writes.
func expiryBeforeObservation(r *script) {
	a, b := r.start("A"), r.start("B")
	expiry := r.def.Params.TTL
	r.at(0).acquire(a)
	r.at(expiry).acquire(b)
	r.write(a, r.def.Params.ValueA) // accepted: the receiver has seen only epoch 1
	r.write(b, r.def.Params.ValueB) // accepted: epoch 2 reaches the receiver
	r.write(a, r.def.Params.ValueA) // stale: now the fence holds
	r.exit(b)
	r.exit(a)
}

// fenceBeforeActing closes the gap: the new holder's epoch reaches the
// receiver before the holder acts, so the old holder's write is already
// stale when it arrives.
func fenceBeforeActing(r *script) {
	a, b := r.start("A"), r.start("B")
	expiry := r.def.Params.TTL
	r.at(0).acquire(a)
	r.at(expiry).acquire(b)
	r.observe(b)                    // the receiver now fences at epoch 2
	r.write(a, r.def.Params.ValueA) // stale, although B has not written
	r.read(b)                       // B sees what is there before acting
	r.write(b, r.def.Params.ValueB) // accepted: the first value at epoch 2
	r.exit(b)
	r.exit(a)
}
