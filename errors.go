package leases

import "errors"

// Limits on what an authority or a receiver stores, so that hostile input
// is refused with ErrInvalidInput instead of bloating or confusing a store.
const (
	// MaxNameBytes bounds resource and holder names.
	MaxNameBytes = 256
	// MaxValueBytes bounds a receiver value.
	MaxValueBytes = 64 << 10
)

// Sentinel errors. Check them with errors.Is; the wrapped message adds the
// details (which resource, which holder, which tick).
//
// Every error an operation returns is one of three kinds, and they call
// for different things:
//
//   - A refusal: the input was refused (ErrInvalidInput, ErrTickBackwards)
//     or the operation was decided against (ErrLeaseHeld, ErrNotHolder,
//     ErrLeaseExpired). Nothing changed.
//   - A failure before commit: any other error except ErrOutcomeUnknown.
//     The store could not read or write, the file moved, the context (or
//     a bound of the store's own, such as the etcd store's CallTimeout)
//     ended before the commit was sent (the error then also matches the
//     context's error, context.Canceled or context.DeadlineExceeded), or
//     the server refused the request on arrival (an etcd member without a
//     leader). Nothing changed, and the operation may be retried.
//   - An unknown outcome: ErrOutcomeUnknown. The commit was sent and
//     failed, or its context or bound ended while it was under way; the
//     change may or may not have taken effect.
var (
	// ErrInvalidInput reports an argument the operation cannot accept: an
	// empty or malformed name, a time-to-live below 1, a negative tick, an
	// epoch below 1. Nothing is changed.
	ErrInvalidInput = errors.New("invalid input")

	// ErrTickBackwards reports a tick earlier than the last tick at which
	// the authority changed the resource's lease. It is also an
	// ErrInvalidInput. Nothing is changed.
	ErrTickBackwards = errors.New("tick runs backwards")

	// ErrLeaseHeld reports an acquire refused because another lease on the
	// resource is still live; the message names the holder and the tick at
	// which its lease expires. The live lease's own holder is refused too:
	// renewal, not a second acquire, extends a lease.
	ErrLeaseHeld = errors.New("lease held")

	// ErrLeaseExpired reports a renew or release of a lease whose expiry
	// tick has been reached. Once expired, a lease can only be acquired
	// again, with a new epoch.
	ErrLeaseExpired = errors.New("lease expired")

	// ErrDatabaseMoved reports that the database file was deleted or
	// replaced after the store opened it. Nothing is changed: going on
	// would write to a file nobody else sees, and a process that opens
	// the path afresh would start epochs from 1 again.
	ErrDatabaseMoved = errors.New("database file deleted or replaced")

	// ErrNotHolder reports a renew or release by someone who does not hold
	// the resource's current lease (another holder, or an older epoch).
	ErrNotHolder = errors.New("not the lease holder")

	// ErrOutcomeUnknown reports an operation whose commit was sent and
	// failed, or whose context ended while the commit was under way: the
	// change may have taken effect, or not, and nothing the caller can do
	// at once will tell. A SQLite commit whose fsync fails, for example,
	// has already written its change to the write-ahead log; whether it
	// counts depends on what the next process to open the file finds.
	//
	// What the caller must do:
	//   - After Acquire: assume the lease may be live, under the holder's
	//     name, until the expiry tick of the lease it would have granted
	//     (returned along with the error), and that its epoch may be
	//     consumed. Do not act on it; a retry by the same holder is refused
	//     with ErrLeaseHeld if it did take effect.
	//   - After Renew or Release: assume either; the lease expires at the
	//     later of the two expiry ticks at the latest.
	//   - After a receiver's Write or Observe: read the record before
	//     retrying; a retry of the same write at the same epoch is a replay
	//     if it did take effect.
	ErrOutcomeUnknown = errors.New("outcome unknown")

	// ErrReopenRequired reports an operation refused because the store
	// saw an unknown outcome before (ErrOutcomeUnknown). After a failed
	// commit, what this process would read may differ from what the file
	// holds (measured: the process still read the old value while the
	// next process read the new one), so the store answers nothing more
	// from that view: close it and open the file again.
	ErrReopenRequired = errors.New("store must be reopened")
)
