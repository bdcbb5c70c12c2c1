package explore

import (
	"context"
	"database/sql"

	"leases"
	"leases/evidence/backend"
)

// The broken authorities and receivers below exist to show that each of
// the explorer's checks can fail. Each answers from the database's rows and
// its arguments alone, as the memo requires.

// earlyAuthority grants one tick early: it is told the tick after the real
// one. It breaks I1.
type earlyAuthority struct{ acquirer }

func (e earlyAuthority) Acquire(ctx context.Context, resource, holder string, now, ttl int64) (leases.Lease, error) {
	return e.acquirer.Acquire(ctx, resource, holder, now+1, ttl)
}

// firstEpochAuthority grants every lease with epoch 1, wherever its count
// is. It breaks I2, and I4 at a receiver that takes two values at one
// epoch.
type firstEpochAuthority struct{ acquirer }

func (f firstEpochAuthority) Acquire(ctx context.Context, resource, holder string, now, ttl int64) (leases.Lease, error) {
	lease, err := f.acquirer.Acquire(ctx, resource, holder, now, ttl)
	if err == nil {
		lease.Epoch = 1
	}
	return lease, err
}

// conflictStoringReceiver is a fenced receiver that stores a second value
// at the stored epoch instead of rejecting it as a conflict. It breaks I4.
type conflictStoringReceiver struct {
	leases.Receiver // fenced
	unfenced        leases.Receiver
}

func newConflictStoringReceiver(store backend.Store) leases.Receiver {
	return conflictStoringReceiver{store.Receiver(leases.Fenced), store.Receiver(leases.Unfenced)}
}

func (c conflictStoringReceiver) Write(ctx context.Context, resource string, epoch int64, value string) (leases.WriteResult, error) {
	result, err := c.Receiver.Write(ctx, resource, epoch, value)
	if err != nil || result.Outcome != leases.Conflict {
		return result, err
	}
	return c.unfenced.Write(ctx, resource, epoch, value)
}

// forgetfulObserveReceiver is a fenced receiver whose Observe answers as
// the real one would but records nothing, so a new holder's read does not
// fence the old holder out. It breaks I5 and lets a stale write in after
// the new holder's read.
type forgetfulObserveReceiver struct{ leases.Receiver }

func newForgetfulObserveReceiver(store backend.Store) leases.Receiver {
	return forgetfulObserveReceiver{store.Receiver(leases.Fenced)}
}

func (f forgetfulObserveReceiver) Fence(ctx context.Context, resource string, epoch int64) (leases.WriteResult, error) {
	record, _, err := f.Read(ctx, resource)
	if err != nil {
		return leases.WriteResult{}, err
	}
	switch {
	case epoch < record.Epoch:
		return leases.WriteResult{Outcome: leases.Stale, Record: record}, nil
	case epoch == record.Epoch:
		return leases.WriteResult{Outcome: leases.Replay, Record: record}, nil
	}
	return leases.WriteResult{Outcome: leases.Accepted, Record: record}, nil
}

// fenceLoweringObserveReceiver is a fenced receiver that, asked to observe
// an epoch below its fence, says it accepted it and answers with the fence
// at that lower epoch, although it stored nothing. It breaks I3 as the
// receiver reports it, on the observe path.
type fenceLoweringObserveReceiver struct{ leases.Receiver }

func newFenceLoweringObserveReceiver(store backend.Store) leases.Receiver {
	return fenceLoweringObserveReceiver{store.Receiver(leases.Fenced)}
}

func (f fenceLoweringObserveReceiver) Fence(ctx context.Context, resource string, epoch int64) (leases.WriteResult, error) {
	result, err := f.Receiver.Fence(ctx, resource, epoch)
	if err == nil && result.Outcome == leases.Stale {
		result.Outcome, result.Record.Epoch = leases.Accepted, epoch
	}
	return result, err
}

// blindGuardedReceiver is a guarded receiver that does not look at the
// lease: it writes as a fenced receiver would, with the lease's epoch. It
// brings the gap back.
type blindGuardedReceiver struct{ fenced leases.Receiver }

func newBlindGuardedReceiver(store backend.Store) leases.GuardedReceiver {
	return blindGuardedReceiver{store.Receiver(leases.Fenced)}
}

func (b blindGuardedReceiver) Write(ctx context.Context, held leases.Lease, _ int64, value string) (leases.WriteResult, error) {
	return b.fenced.Write(ctx, held.Resource, held.Epoch, value)
}

func (b blindGuardedReceiver) Read(ctx context.Context, resource string) (leases.Record, bool, error) {
	return b.fenced.Read(ctx, resource)
}

// alwaysLive is a store's user transactions with the lease check dropped:
// every lease is live.
type alwaysLive struct{ backend.UserTransactions }

func (alwaysLive) LiveIn(context.Context, *sql.Tx, leases.Lease, int64) (bool, error) {
	return true, nil
}

// newBlindTxGuard is the guarded write in the user's transaction without
// its look at the lease: the fence alone. It brings the gap back.
func newBlindTxGuard(store backend.Store) leases.GuardedReceiver {
	w := store.(withFence)
	return &txGuarded{fence: w.fence, users: alwaysLive{w.Rewindable.(backend.UserTransactions)}}
}
