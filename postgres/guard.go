package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"leases"
	"leases/fence"
	"leases/internal/rules"
)

// ErrNotLive reports that a lease was not the live one on the server's
// clock when a transaction of yours asked (AdmitLive, LiveTenure): it
// expired, was released, or a newer epoch was granted. It is a refusal:
// the error also matches leases.ErrLeaseExpired (it expired) or
// leases.ErrNotHolder (released or superseded), and leases.IsRefusal
// holds. Nothing of the transaction was committed by the guard.
var ErrNotLive = errors.New("lease not live on the server's clock")

// Fence is the fence a guarded transaction raises: a *fence.Table or a
// *fence.Prepared of PostgreSQL, in the database that holds the store's
// tables (your transaction must reach both).
type Fence interface {
	Observe(ctx context.Context, tx *sql.Tx, resource string, epoch int64) (leases.WriteResult, error)
	Admit(ctx context.Context, tx *sql.Tx, resource string, epoch int64) (leases.WriteResult, error)
	Read(ctx context.Context, tx *sql.Tx, resource string) (leases.Record, bool, error)
}

var (
	_ Fence = (*fence.Table)(nil)
	_ Fence = (*fence.Prepared)(nil)
)

// AdmitLive admits tx, a transaction of yours in the database that holds
// the store's tables and fences, for the holder of held, only while
// held is the live lease on the server's clock and its epoch the newest
// fences has seen: "live, and the newest tenure", where fence.Admit is
// "the newest tenure" alone. In tx, in this order, it:
//
//  1. locks held's lease row FOR KEY SHARE and reads the server's clock
//     after the lock, and answers NotLive unless held is the resource's
//     lease and has not expired at that time (the tick of the check,
//     never before the row's last change);
//  2. admits tx at fences (fence.Admit): the fence rises to held's epoch,
//     or is at it, and its row is locked until tx ends; Stale if a newer
//     epoch reached the fence (a newer tenure has begun).
//
// Accepted: store your rows in tx and commit; they commit with the fence
// at held's epoch, or not at all. NotLive or Stale: roll tx back and stop
// acting for this lease. The record is the fence's.
//
// Why a holder paused after the check cannot commit after a newer
// holder was granted: the key-share lock on the lease row lasts until tx
// ends, and a grant (Acquire) locks the row FOR UPDATE, which waits for
// it. A transaction admitted while the lease was live therefore commits,
// if at all, before the next grant of the resource, in the order of the
// server's commits; from that grant on, every check answers NotLive. The
// holder's own renewals and its release lock the row FOR NO KEY UPDATE,
// which does not wait for the key-share lock, and any number of guarded
// transactions share it.
//
// What it costs the next holder: its Acquire waits for every guarded
// transaction of the older holder still open, also for one that is
// paused (a stopped process, a long call) past the lease's expiry, and
// is refused or granted only when they end. Bound that wait in the
// server: idle_in_transaction_session_timeout ends a session that idles
// inside a transaction (rolling it back), statement_timeout a statement
// that runs too long; lock_timeout bounds the next holder's own wait.
// Keep guarded transactions short, and begin them with the session's
// context (session.Session.Context), so that they are rolled back at the
// session's end.
//
// Under REPEATABLE READ and SERIALIZABLE, a lease row or fence row
// changed since tx's snapshot fails the statement with a serialization
// failure (IsSerializationFailure): roll back and try the transaction
// again. Invalid input is refused with leases.ErrInvalidInput before any
// statement runs; any other error leaves tx to be rolled back.
func (l *ServerClock) AdmitLive(ctx context.Context, tx *sql.Tx, fences Fence, held leases.Lease) (leases.WriteResult, error) {
	result, _, err := l.guard(ctx, tx, fences.Admit, fences, held)
	if err != nil {
		return leases.WriteResult{}, fmt.Errorf("postgres: admit %q at epoch %d while live: %w", held.Resource, held.Epoch, err)
	}
	return result, nil
}

// guard is AdmitLive with raise, the fence's Admit or Observe, as its
// second step. When it answers NotLive, notLive says why, as an error
// matching ErrNotLive.
func (l *ServerClock) guard(ctx context.Context, tx *sql.Tx,
	raise func(ctx context.Context, tx *sql.Tx, resource string, epoch int64) (leases.WriteResult, error),
	fences Fence, held leases.Lease) (result leases.WriteResult, notLive, err error) {
	if err := rules.CheckHeld(held, 0); err != nil {
		return leases.WriteResult{}, nil, err
	}
	row, found, clock, err := l.store.lockLease(ctx, tx, held.Resource, lockGuard)
	if err != nil {
		return leases.WriteResult{}, nil, err
	}
	now := rules.NotBefore(row, found, clock)
	live, err := rules.LiveFor(row, found, held, now)
	switch {
	case err != nil:
		return leases.WriteResult{}, nil, err
	case !live:
		stored, _, err := fences.Read(ctx, tx, held.Resource)
		return leases.WriteResult{Outcome: leases.NotLive, Record: stored}, whyNotLive(row, found, held, now), err
	}
	result, err = raise(ctx, tx, held.Resource, held.Epoch)
	return result, nil, err
}

// whyNotLive says why held is not the live lease of row at tick now.
func whyNotLive(row rules.LeaseRow, found bool, held leases.Lease, now int64) error {
	switch {
	case !found:
		return fmt.Errorf("%w (%w): %q was never leased", ErrNotLive, leases.ErrNotHolder, held.Resource)
	case row.Epoch != held.Epoch || row.Holder != held.Holder:
		return fmt.Errorf("%w (%w): %s", ErrNotLive, leases.ErrNotHolder, rules.Mismatch(row, held, now))
	case !row.Held:
		return fmt.Errorf("%w (%w): epoch %d of %q was released", ErrNotLive, leases.ErrNotHolder, held.Epoch, held.Resource)
	}
	return fmt.Errorf("%w (%w): epoch %d of %q expired at tick %d, %d ms before the check",
		ErrNotLive, leases.ErrLeaseExpired, held.Epoch, held.Resource, row.ExpiresAt, now-row.ExpiresAt)
}

// LiveTenure is a lease holder's use of the fence for one lease, on the
// server's clock: fence.Tenure's shape, with every transaction admitted
// by AdmitLive ("live, and the newest tenure") rather than by fence.Admit
// ("the newest tenure"). Safe for concurrent use.
type LiveTenure struct {
	lessor *ServerClock
	db     *sql.DB
	fences Fence
	held   leases.Lease
}

// LiveTenure begins the tenure of held in db: in a transaction of its
// own it checks that held is live on the server's clock (as AdmitLive
// does) and observes held's epoch at fences, so that from its commit on
// every transaction of an older tenure that fences guards is refused. It
// returns an error matching ErrNotLive when held is not live, and
// fence.ErrSuperseded when a newer epoch reached the fence first. Call
// it right after the lease was granted, with the session's context.
func (l *ServerClock) LiveTenure(ctx context.Context, db *sql.DB, fences Fence, held leases.Lease) (*LiveTenure, error) {
	t := &LiveTenure{lessor: l, db: db, fences: fences, held: held}
	if err := t.run(ctx, nil, fences.Observe, nil); err != nil {
		return nil, fmt.Errorf("postgres: begin the live tenure of epoch %d on %q: %w", held.Epoch, held.Resource, err)
	}
	return t, nil
}

// Lease is the lease the tenure was begun with.
func (t *LiveTenure) Lease() leases.Lease { return t.held }

// Tx runs fn in a transaction of the tenure and commits it: it begins a
// transaction on the tenure's database with ctx and opts, admits it with
// AdmitLive (the lease row is then share-locked and the fence row locked
// until the transaction ends), runs fn, and commits. Pass the session's
// context: a transaction whose session has ended by the commit is
// rolled back, not committed.
//
// The error says which of these happened:
//   - ErrNotLive (a refusal): the lease is no longer live on the server's
//     clock; nothing committed, and this holder must stop.
//   - fence.ErrSuperseded (a refusal): a newer epoch reached the fence.
//   - fn's error: rolled back, fn's error returned (wrapped).
//   - leases.ErrOutcomeUnknown: the commit was sent and failed; it may
//     have committed. Read your rows before trying again.
//   - anything else (also ctx's end, and a serialization failure, which
//     is not tried again here: fn is yours): a failure before commit,
//     nothing committed; the transaction may be tried again while the
//     lease lasts.
//
// While fn runs, the next holder's Acquire waits (see AdmitLive).
func (t *LiveTenure) Tx(ctx context.Context, opts *sql.TxOptions, fn func(tx *sql.Tx) error) error {
	if err := t.run(ctx, opts, t.fences.Admit, fn); err != nil {
		return fmt.Errorf("postgres: transaction of epoch %d on %q: %w", t.held.Epoch, t.held.Resource, err)
	}
	return nil
}

// run runs one transaction of the tenure: the guard with raise, then fn
// when there is one, then the commit.
func (t *LiveTenure) run(ctx context.Context, opts *sql.TxOptions,
	raise func(ctx context.Context, tx *sql.Tx, resource string, epoch int64) (leases.WriteResult, error),
	fn func(tx *sql.Tx) error) error {
	return once(ctx, t.db, opts, func(tx *sql.Tx) (bool, error) {
		result, notLive, err := t.lessor.guard(ctx, tx, raise, t.fences, t.held)
		switch {
		case err != nil:
			return false, err
		case notLive != nil:
			return false, notLive
		case result.Outcome == leases.Stale:
			return false, fmt.Errorf("%w: the fence is at epoch %d", fence.ErrSuperseded, result.Record.Epoch)
		}
		if fn == nil {
			return true, nil
		}
		if err := fn(tx); err != nil {
			return false, err
		}
		return true, nil
	})
}
