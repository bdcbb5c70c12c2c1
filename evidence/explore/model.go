package explore

import (
	"context"
	"errors"
	"fmt"

	"leases"
)

// Bounds are the limits of the explored model.
type Bounds struct {
	// Workers is how many workers (A, B, C, ...) each try once.
	Workers int `json:"workers"`
	// TTL is every lease's time-to-live in ticks.
	TTL int64 `json:"ttl"`
	// LastTick is where the clock stops; it starts at 0.
	LastTick int64 `json:"last_tick"`
}

// DefaultBounds are the bounds results.json reports.
var DefaultBounds = Bounds{Workers: 3, TTL: 2, LastTick: 4}

// maxWorkers bounds Bounds.Workers so that a model state is a fixed-size,
// comparable value that can key the memo.
const maxWorkers = 4

// Check refuses bounds the explorer cannot run.
func (b Bounds) Check() error {
	switch {
	case b.Workers < 1 || b.Workers > maxWorkers:
		return fmt.Errorf("%w: %d workers, want 1 to %d", leases.ErrInvalidInput, b.Workers, maxWorkers)
	case b.TTL < 1:
		return fmt.Errorf("%w: ttl %d is below 1", leases.ErrInvalidInput, b.TTL)
	case b.LastTick < 0:
		return fmt.Errorf("%w: last tick %d is negative", leases.ErrInvalidInput, b.LastTick)
	}
	return nil
}

// Protocol is how workers use the receiver in the explored model.
type Protocol string

// The explored protocols.
const (
	// Unfenced: acquire, then write; the receiver stores whatever comes last.
	Unfenced Protocol = "unfenced"
	// Fenced: acquire, then write; the receiver of C6.
	Fenced Protocol = "fenced"
	// FenceBeforeActingProtocol: acquire, observe the epoch at the receiver,
	// read the receiver, then write.
	FenceBeforeActingProtocol Protocol = "fence-before-acting"
	// GuardedProtocol: acquire, then write to the guarded receiver, which
	// checks in the write's own transaction that the writer's lease is the
	// live one at the write's tick.
	GuardedProtocol Protocol = "guarded"
	// TxFenceProtocol: acquire, then write through package fence in a
	// transaction of the user's own, on a database of the user's (apart
	// from the backend's store); the fenced receiver's rule, in SQL.
	TxFenceProtocol Protocol = "in-transaction-fence"
	// TxGuardedProtocol: acquire, then write in a transaction of the
	// user's own on the database that holds the leases: the lease checked
	// live at the write's tick and package fence's Write, one
	// transaction. Explored where the backend's store lets a user's
	// transaction see the authority's rows (backend.UserTransactions).
	TxGuardedProtocol Protocol = "guarded-in-transaction"
)

var protocols = []Protocol{Unfenced, Fenced, FenceBeforeActingProtocol, GuardedProtocol, TxFenceProtocol, TxGuardedProtocol}

// needsLease reports whether p's write needs the writer's whole lease
// (the guarded ones check it), not its epoch alone.
func (p Protocol) needsLease() bool { return p == GuardedProtocol || p == TxGuardedProtocol }

// phase is where a worker is in its one try.
type phase uint8

const (
	idle     phase = iota // next: acquire
	holding               // granted; next: write, or observe before acting
	observed              // fence-before-acting; next: read
	hasRead               // fence-before-acting; next: write
	finished              // refused, superseded, or written
)

// property is something counted per schedule: an invariant violated, or
// one of the protocol's weaknesses.
type property uint8

const (
	propOneLiveLease   property = iota // I1 violated: two live leases at one tick
	propEpochsIncrease                 // I2 violated: an epoch not above all earlier ones
	propFenceMonotone                  // I3 violated: the receiver's epoch went down
	propOneValue                       // I4 violated: two values accepted at one epoch
	propBelowCommitted                 // I5 violated: a write below a committed epoch accepted
	propLostUpdate                     // a stale write overwrote a newer value
	propGap                            // a stale write accepted before the receiver saw the newer epoch
	propAfterRead                      // a stale write accepted after the new holder read the receiver
	numProperties
)

var propertyNames = [numProperties]string{
	"I1_at_most_one_live_lease", "I2_granted_epochs_increase", "I3_fence_never_decreases",
	"I4_one_value_per_epoch", "I5_no_write_below_committed_epoch",
	"lost_update", "gap", "stale_write_accepted_after_new_holders_read",
}

// maxEpochs bounds the epochs the model remembers values for.
const maxEpochs = 2 * maxWorkers

// modelState is everything about a point in a schedule that the database
// does not hold: the clock, each worker's progress, what has been granted,
// committed and read so far, and which properties this schedule already
// has. It is comparable, so that together with the database rows it keys
// the memo.
type modelState struct {
	clock        int64
	phases       [maxWorkers]phase
	epochs       [maxWorkers]int64   // each worker's granted epoch
	grants       [maxWorkers]int64   // each worker's grant tick; guarded protocol only
	expiries     [maxWorkers]int64   // each worker's expiry tick; guarded protocol only
	maxGranted   int64               // highest epoch granted so far
	maxExpiry    int64               // latest expiry tick of any granted lease
	maxCommitted int64               // highest epoch the receiver has committed
	maxRead      int64               // highest epoch whose holder has read the receiver
	acceptedBy   [maxEpochs + 1]int8 // the worker (1 + index) whose value was accepted at each epoch
	receiver     leases.Record       // the receiver's record, as its last answer said
	seen         [numProperties]bool
}

// model runs one protocol's steps on the real authority and receiver.
type model struct {
	bounds    Bounds
	protocol  Protocol
	authority acquirer
	receiver  leases.Receiver
	guarded   leases.GuardedReceiver
}

// acquirer is the part of the authority the model uses; tests substitute a
// faulty one to prove that the checks can fail.
type acquirer interface {
	Acquire(ctx context.Context, resource, holder string, now, ttl int64) (leases.Lease, error)
}

const modelResource = "explored-resource"

func workerName(i int) string { return string(rune('A' + i)) }

func workerValue(i int) string { return "value-from-" + workerName(i) }

// Worker i's next step is action i; tickAction, the controller's step,
// sorts after every worker's.
const tickAction = maxWorkers

// enabled lists the steps that can come next, in the fixed order that
// breaks ties between counterexamples: A, B, C, then the clock.
func (m *model) enabled(s *modelState, into []int8) []int8 {
	into = into[:0]
	for i := range m.bounds.Workers {
		if s.phases[i] != finished {
			into = append(into, int8(i))
		}
	}
	if s.clock < m.bounds.LastTick {
		into = append(into, tickAction)
	}
	return into
}

// step runs action on the real code and returns the next state and a line
// describing what happened.
func (m *model) step(ctx context.Context, s modelState, action int8) (modelState, string, error) {
	if action == tickAction {
		s.clock++
		return s, fmt.Sprintf("clock: tick %d", s.clock), nil
	}
	i := int(action)
	name := workerName(i)
	switch s.phases[i] {
	case idle:
		return m.acquire(ctx, s, i)
	case holding:
		if m.protocol == FenceBeforeActingProtocol {
			return m.observe(ctx, s, i)
		}
		return m.write(ctx, s, i)
	case observed:
		record, _, err := m.receiver.Read(ctx, modelResource)
		if err != nil {
			return s, "", err
		}
		s.receiver, s.phases[i] = record, hasRead
		s.maxRead = max(s.maxRead, s.epochs[i])
		return s, fmt.Sprintf("%s reads: %s", name, describeRecord(record)), nil
	case hasRead:
		return m.write(ctx, s, i)
	}
	return s, "", fmt.Errorf("worker %s has no next step", name)
}

// grant is worker i's acquire at tick now, and the line describing it;
// refused when the lease is held.
func grant(ctx context.Context, authority acquirer, i int, now, ttl int64) (lease leases.Lease, refused bool, line string, err error) {
	name := workerName(i)
	lease, err = authority.Acquire(ctx, modelResource, name, now, ttl)
	switch {
	case errors.Is(err, leases.ErrLeaseHeld):
		return lease, true, fmt.Sprintf("%s acquires at tick %d: refused", name, now), nil
	case err != nil:
		return lease, false, "", err
	}
	return lease, false, fmt.Sprintf("%s acquires at tick %d: epoch %d, expires at tick %d", name, now, lease.Epoch, lease.ExpiresAt), nil
}

func (m *model) acquire(ctx context.Context, s modelState, i int) (modelState, string, error) {
	lease, refused, line, err := grant(ctx, m.authority, i, s.clock, m.bounds.TTL)
	if err != nil || refused {
		s.phases[i] = finished
		return s, line, err
	}
	if lease.Epoch > maxEpochs {
		return s, "", fmt.Errorf("epoch %d is beyond the model's %d", lease.Epoch, maxEpochs)
	}
	s.seen[propEpochsIncrease] = s.seen[propEpochsIncrease] || lease.Epoch <= s.maxGranted
	s.seen[propOneLiveLease] = s.seen[propOneLiveLease] || s.clock < s.maxExpiry
	s.maxGranted, s.maxExpiry = max(s.maxGranted, lease.Epoch), max(s.maxExpiry, lease.ExpiresAt)
	s.phases[i], s.epochs[i] = holding, lease.Epoch
	if m.protocol.needsLease() {
		// Only the guarded writes need the whole lease. The other
		// protocols' futures do not depend on it, so their states are not
		// split by it.
		s.grants[i], s.expiries[i] = lease.GrantedAt, lease.ExpiresAt
	}
	return s, line, nil
}

func (m *model) observe(ctx context.Context, s modelState, i int) (modelState, string, error) {
	epoch := s.epochs[i]
	result, err := m.receiver.Fence(ctx, modelResource, epoch)
	if err != nil {
		return s, "", err
	}
	s.seen[propFenceMonotone] = s.seen[propFenceMonotone] || result.Record.Epoch < s.receiver.Epoch
	s.receiver = result.Record
	if result.Outcome == leases.Stale {
		s.phases[i] = finished // superseded before acting: it must not act
	} else {
		s.phases[i] = observed
		s.maxCommitted = max(s.maxCommitted, epoch)
	}
	return s, fmt.Sprintf("%s raises the fence to epoch %d: %s", workerName(i), epoch, result.Outcome), nil
}

func (m *model) write(ctx context.Context, s modelState, i int) (modelState, string, error) {
	epoch, value := s.epochs[i], workerValue(i)
	before := s.receiver
	var result leases.WriteResult
	var err error
	if m.protocol.needsLease() {
		held := leases.Lease{Resource: modelResource, Holder: workerName(i), Epoch: epoch, GrantedAt: s.grants[i], ExpiresAt: s.expiries[i]}
		result, err = m.guarded.Write(ctx, held, s.clock, value)
	} else {
		result, err = m.receiver.Write(ctx, modelResource, epoch, value)
	}
	if err != nil {
		return s, "", err
	}
	if result.Outcome == leases.Accepted {
		stale := epoch < s.maxGranted
		s.seen[propBelowCommitted] = s.seen[propBelowCommitted] || epoch < s.maxCommitted
		s.seen[propOneValue] = s.seen[propOneValue] || (s.acceptedBy[epoch] != 0 && s.acceptedBy[epoch] != int8(i+1))
		s.seen[propLostUpdate] = s.seen[propLostUpdate] || (stale && before.ValueEpoch > epoch)
		s.seen[propGap] = s.seen[propGap] || (stale && s.maxCommitted <= epoch)
		s.seen[propAfterRead] = s.seen[propAfterRead] || epoch < s.maxRead
		s.acceptedBy[epoch] = int8(i + 1)
		s.maxCommitted = max(s.maxCommitted, epoch)
	}
	s.seen[propFenceMonotone] = s.seen[propFenceMonotone] || result.Record.Epoch < before.Epoch
	s.receiver, s.phases[i] = result.Record, finished
	return s, fmt.Sprintf("%s writes %q with epoch %d: %s", workerName(i), value, epoch, result.Outcome), nil
}

func describeRecord(r leases.Record) string {
	if r.ValueEpoch == 0 {
		return fmt.Sprintf("fence at epoch %d, no value", r.Epoch)
	}
	return fmt.Sprintf("fence at epoch %d, %q from epoch %d", r.Epoch, r.Value, r.ValueEpoch)
}
