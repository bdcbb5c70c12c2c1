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
)
