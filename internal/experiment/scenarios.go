package experiment

import "leases"

// scenarioDef is one named schedule and the receiver it runs against.
type scenarioDef struct {
	name        string
	description string
	mode        leases.Mode
	params      Parameters
	schedule    func(*scenarioRun)
}

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

var scenarios = []scenarioDef{
	{
		name: UnfencedReceiver,
		description: "A acquires at tick 0 and pauses past its expiry; B is refused one tick before A's expiry, " +
			"acquires at the expiry tick, writes, resends, sends a different value, and exits; A resumes and writes " +
			"with its old epoch. The receiver does not compare epochs.",
		mode: leases.Unfenced, params: pausedHolderParams, schedule: pausedHolder,
	},
	{
		name:        FencedReceiver,
		description: "The same schedule against a receiver that compares epochs.",
		mode:        leases.Fenced, params: pausedHolderParams, schedule: pausedHolder,
	},
	{
		name: ExpiryBeforeReceiverObservationGap,
		description: "A acquires at tick 0 and pauses past its expiry; B acquires at the expiry tick but has not " +
			"written yet; A resumes and writes first, so the fenced receiver has not observed epoch 2; then B " +
			"writes, then A's old write arrives again.",
		mode: leases.Fenced, params: gapParams, schedule: expiryBeforeObservation,
	},
	{
		name: FenceBeforeActing,
		description: "Beyond the seed: the gap's schedule, but B records its epoch at the receiver (observe) right " +
			"after acquiring and before it reads or writes; A's old write then arrives and is rejected.",
		mode: leases.Fenced, params: gapParams, schedule: fenceBeforeActing,
	},
}

// pausedHolder is the seed's schedule: A commits its acquisition and
// pauses; B acquires at the exact expiry tick, writes and exits; A resumes
// and writes with its old epoch.
func pausedHolder(r *scenarioRun) {
	a, b := r.start("A"), r.start("B")
	expiry := r.def.params.TTL // A is granted at tick 0
	r.at(0).acquire(a)
	r.at(expiry - 1).acquire(b) // refused: A's lease is live until its expiry tick
	r.at(expiry).acquire(b)     // granted: A's lease has expired, B gets epoch 2
	r.write(b, r.def.params.ValueB)
	r.write(b, r.def.params.ValueB)            // a retried write: replay
	r.write(b, r.def.params.ConflictingValueB) // a second value at epoch 2: conflict
	r.exit(b)
	r.write(a, r.def.params.ValueA) // the paused holder resumes
	r.exit(a)
}

// expiryBeforeObservation is the gap: the new holder's epoch has not
// reached the receiver when the old holder writes.
func expiryBeforeObservation(r *scenarioRun) {
	a, b := r.start("A"), r.start("B")
	expiry := r.def.params.TTL
	r.at(0).acquire(a)
	r.at(expiry).acquire(b)
	r.write(a, r.def.params.ValueA) // accepted: the receiver has seen only epoch 1
	r.write(b, r.def.params.ValueB) // accepted: epoch 2 reaches the receiver
	r.write(a, r.def.params.ValueA) // stale: now the fence holds
	r.exit(b)
	r.exit(a)
}

// fenceBeforeActing closes the gap: the new holder's epoch reaches the
// receiver before the holder acts, so the old holder's write is already
// stale when it arrives.
func fenceBeforeActing(r *scenarioRun) {
	a, b := r.start("A"), r.start("B")
	expiry := r.def.params.TTL
	r.at(0).acquire(a)
	r.at(expiry).acquire(b)
	r.observe(b)                    // the receiver now fences at epoch 2
	r.write(a, r.def.params.ValueA) // stale, although B has not written
	r.read(b)                       // B sees what is there before acting
	r.write(b, r.def.params.ValueB) // accepted: the first value at epoch 2
	r.exit(b)
	r.exit(a)
}
