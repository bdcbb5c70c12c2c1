package postgres

import (
	"context"
	"database/sql"
	"fmt"

	"leases"
	"leases/fence"
	"leases/internal/guard"
	"leases/internal/rules"
	"leases/internal/sqltx"
)

// Tenure begins the tenure of lease in the store's database, for your
// own transactions there: the guard of a team that keeps the leases in
// the same PostgreSQL database as its rows. Every transaction of the
// tenure ([fence.Tenure.Tx]) is admitted only while lease is the live
// lease on the server's clock and its epoch the newest the store's fence
// table has seen, and its COMMIT goes through only if the lease is still
// live on the server's clock when the server commits it: a holder paused
// between its statements and its COMMIT, or while its COMMIT was on its
// way, commits nothing after its lease's expiry. Begin it right after the
// lease was granted, with the session's context; pass that context to
// every Tx. It returns an error matching leases.ErrNotLive when lease is
// not live, and leases.ErrStale when a newer epoch reached the fence
// first. Your transactions must run on the store's *sql.DB (the tenure
// begins them there).
//
// In each transaction, in this order, the tenure:
//
//  1. locks the lease's row FOR KEY SHARE, reads the server's clock
//     after the lock, and refuses with leases.ErrNotLive unless the lease
//     is the resource's and has not expired at that time;
//  2. admits the transaction at the store's fence table (the fence rises
//     to the lease's epoch, or is at it, and its row is locked until the
//     transaction ends), or refuses with leases.ErrStale;
//  3. runs your function, then sends COMMIT; at the COMMIT a deferred
//     constraint trigger on the fence table reads the lease's row and
//     the server's clock again, and aborts the commit unless the lease is
//     still live: the COMMIT then fails with leases.ErrNotLive, and
//     nothing of the transaction committed.
//
// Why a holder paused after step 1 cannot commit after a newer holder
// was granted: the key-share lock on the lease row lasts until the
// transaction ends, and a grant locks the row FOR UPDATE, which waits
// for it. Why it cannot commit after its lease's expiry: step 3 runs in
// the server, at the commit, whatever the holder's process is doing.
// What remains is the instant between the trigger's check and the commit
// record (the server writing and flushing the commit to its log), which
// no client's pause can stretch; docs/postgres.md gives the figures.
//
// What it costs the next holder: its Acquire waits for every transaction
// of the older tenure still open, also one that is paused (a stopped
// process, a long call) past the lease's expiry. Bound that wait with
// idle_in_transaction_session_timeout, no longer than the session's
// margin (docs/postgres.md says why and measures it). The holder's own
// renewals and its release lock the row FOR NO KEY UPDATE, which does not
// wait for the key-share lock.
//
// Isolation: each transaction runs at the level its Tx options ask for
// (the server's default, READ COMMITTED, when they do not). Under
// REPEATABLE READ and SERIALIZABLE, a lease or fence row changed since
// the transaction's snapshot fails a statement or the commit with a
// serialization failure (IsSerializationFailure; nothing committed): roll
// back and try again; and the check at the commit reads the lease as the
// snapshot saw it, so that a renewal committed meanwhile is not seen (the
// check may then refuse a lease that was renewed, never admit one that
// expired). The tenure's own first transaction, which observes the epoch,
// runs at the server's default level.
func (s *Store) Tenure(ctx context.Context, lease leases.Lease) (*fence.Tenure, error) {
	g := &liveGuard{store: s, base: guard.Table(s.tenures, guard.TableOptions{
		Run: sqltx.Options{Known: known, Step: step},
	})}
	t, err := guard.Tenure(ctx, lease, g)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	return t.(*fence.Tenure), nil
}

// liveGuard is the guard of a store's tenures: the lease live on the
// server's clock, then the epoch at the store's fence table.
type liveGuard struct {
	store *Store
	base  guard.Guard
}

var _ guard.Guard = (*liveGuard)(nil)

func (g *liveGuard) Run(ctx context.Context, opts *sql.TxOptions, fn func(tx *sql.Tx) (bool, error)) error {
	return g.base.Run(ctx, opts, fn)
}

func (g *liveGuard) Begin(ctx context.Context, tx *sql.Tx, lease leases.Lease) error {
	if err := g.live(ctx, tx, lease); err != nil {
		return err
	}
	return g.base.Begin(ctx, tx, lease)
}

func (g *liveGuard) Admit(ctx context.Context, tx *sql.Tx, lease leases.Lease) (guard.Marker, error) {
	if err := g.live(ctx, tx, lease); err != nil {
		return guard.Marker{}, err
	}
	return g.base.Admit(ctx, tx, lease)
}

func (g *liveGuard) Resolve(ctx context.Context, lease leases.Lease, m guard.Marker) (bool, error) {
	return g.base.Resolve(ctx, lease, m)
}

// live locks held's lease row FOR KEY SHARE in tx, reads the server's
// clock after the lock, and refuses with leases.ErrNotLive unless held is
// the resource's lease and has not expired at that time (the tick of the
// check, never before the row's last change).
func (g *liveGuard) live(ctx context.Context, tx *sql.Tx, held leases.Lease) error {
	row, found, clock, err := g.store.lockLease(ctx, tx, held.Resource, lockGuard)
	if err != nil {
		return err
	}
	now := rules.NotBefore(row, found, clock)
	live, err := rules.LiveFor(row, found, held, now)
	if err != nil || live {
		return err
	}
	return rules.NotLive(row, found, held, now)
}

// The SQLSTATEs with which the check at the commit aborts a transaction
// of a tenure (liveFunctionTemplate): the lease expired, or it is not
// the resource's lease any more (released, or a newer epoch granted).
const (
	stateExpiredAtCommit   = "LS001"
	stateNotHolderAtCommit = "LS002"
)

// notLiveAtCommit is the refusal of a COMMIT that the check at the
// commit aborted, or nil for any other error: the server rolled the
// transaction back, and its answer says why.
func notLiveAtCommit(err error) error {
	switch sqltx.SQLState(err) {
	case stateExpiredAtCommit:
		return &refusedAtCommit{err: err, kind: leases.ErrLeaseExpired}
	case stateNotHolderAtCommit:
		return &refusedAtCommit{err: err, kind: leases.ErrNotHolder}
	}
	return nil
}

// refusedAtCommit is a COMMIT refused by the check at the commit: it
// matches leases.ErrNotLive and kind, and says what the server said.
type refusedAtCommit struct {
	err  error
	kind error
}

func (e *refusedAtCommit) Error() string   { return "nothing committed: " + e.err.Error() }
func (e *refusedAtCommit) Unwrap() []error { return []error{leases.ErrNotLive, e.kind, e.err} }
