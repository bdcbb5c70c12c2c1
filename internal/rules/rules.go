// Package rules is the contract's decisions, written once for every
// backend: which arguments are valid, when a lease is granted, renewed or
// released and with which epoch, and what a receiver does with a write.
// A backend reads the stored state, asks these functions what to do, and
// writes the answer in the same transaction; it decides nothing itself.
package rules

import (
	"errors"
	"fmt"

	"leases"
)

// LeaseRow is the stored state of one resource at the authority: live,
// expired or released.
type LeaseRow struct {
	// Epoch is the last epoch granted for the resource; never reused.
	Epoch int64 `json:"epoch"`
	// Holder is empty once the lease is released (Held is then false).
	Holder string `json:"holder"`
	Held   bool   `json:"held"`
	// GrantedAt and ExpiresAt are the current tenure's grant and expiry
	// ticks.
	GrantedAt int64 `json:"granted_at"`
	ExpiresAt int64 `json:"expires_at"`
	// LastTick is the last tick that changed the row: later operations
	// may not come with an earlier one.
	LastTick int64 `json:"last_tick"`
}

// LiveAt reports whether the row holds a live lease at tick now.
func (r LeaseRow) LiveAt(now int64) bool { return r.Held && now < r.ExpiresAt }

// Lease is the row's tenure as a lease on resource.
func (r LeaseRow) Lease(resource string) leases.Lease {
	return leases.Lease{Resource: resource, Holder: r.Holder, Epoch: r.Epoch, GrantedAt: r.GrantedAt, ExpiresAt: r.ExpiresAt}
}

// TickFunc decides the tick of a decision on the row read in its
// transaction (found is false when there is none), for a time-to-live of
// ttl ticks (0 for a release or a holder query): the caller's tick, or
// the authority's own clock. Its error is a refusal.
type TickFunc func(row LeaseRow, found bool, ttl int64) (int64, error)

// At is the TickFunc of a caller that says the tick: now, checked by the
// caller's argument check.
func At(now int64) TickFunc {
	return func(LeaseRow, bool, int64) (int64, error) { return now, nil }
}

// Clock is the TickFunc of an authority that keeps time itself: now() as
// its clock reads it inside the decision's transaction, but never earlier
// than the row's last change, so that a clock stepped back cannot make a
// decision's tick run backwards (the lease then lasts longer, never
// shorter). Negative readings and expiries that would overflow are
// refused as invalid input.
func Clock(now func() int64) TickFunc {
	return func(row LeaseRow, found bool, ttl int64) (int64, error) {
		tick := NotBefore(row, found, now())
		if err := CheckTick(tick); err != nil {
			return 0, err
		}
		if ttl > 0 {
			if err := CheckTTL(tick, ttl); err != nil {
				return 0, err
			}
		}
		return tick, nil
	}
}

// NotBefore is the tick of a decision on an authority's own clock, given
// the clock's reading: the reading, but never earlier than the row's last
// change.
func NotBefore(row LeaseRow, found bool, clock int64) int64 {
	if found {
		return max(clock, row.LastTick)
	}
	return clock
}

// Acquire decides an acquire of resource by holder at tick now for ttl
// ticks, given the stored row (found is false when the resource was never
// leased): the row to store and the lease granted, or a refusal.
func Acquire(row LeaseRow, found bool, resource, holder string, now, ttl int64) (LeaseRow, leases.Lease, error) {
	next := int64(1)
	if found {
		if err := checkNotBackwards(resource, row, now); err != nil {
			return LeaseRow{}, leases.Lease{}, err
		}
		if row.LiveAt(now) {
			return LeaseRow{}, leases.Lease{}, &leases.HeldError{Live: row.Lease(resource), At: now}
		}
		next = row.Epoch + 1
	}
	granted := LeaseRow{Epoch: next, Holder: holder, Held: true, GrantedAt: now, ExpiresAt: now + ttl, LastTick: now}
	return granted, granted.Lease(resource), nil
}

// Granted is what an acquire of resource for holder at tick now answers
// once its transaction has ended with err: the lease on success; on an
// unknown outcome, the lease it would have granted beside the error, since
// that lease may now be live until its expiry tick; otherwise no lease.
func Granted(lease leases.Lease, err error, resource, holder string, now int64) (leases.Lease, error) {
	if err == nil {
		return lease, nil
	}
	err = fmt.Errorf("acquire %q for %q at tick %d: %w", resource, holder, now, err)
	if errors.Is(err, leases.ErrOutcomeUnknown) {
		return lease, err
	}
	return leases.Lease{}, err
}

// Renew decides a renewal of held at tick now for ttl ticks.
func Renew(row LeaseRow, found bool, held leases.Lease, now, ttl int64) (LeaseRow, leases.Lease, error) {
	if err := checkHolds(row, found, held, now); err != nil {
		return LeaseRow{}, leases.Lease{}, err
	}
	// Never earlier: a short renewal of a long lease must not hand the
	// resource to someone else before the expiry the holder was given.
	row.ExpiresAt, row.LastTick = max(row.ExpiresAt, now+ttl), now
	return row, row.Lease(held.Resource), nil
}

// Holder decides what a holder query at tick now answers: the live lease,
// if any.
func Holder(row LeaseRow, found bool, resource string, now int64) (leases.Lease, bool) {
	if !found || !row.LiveAt(now) {
		return leases.Lease{}, false
	}
	return row.Lease(resource), true
}

// Release decides a release of held at tick now.
func Release(row LeaseRow, found bool, held leases.Lease, now int64) (LeaseRow, error) {
	if err := checkHolds(row, found, held, now); err != nil {
		return LeaseRow{}, err
	}
	row.Holder, row.Held, row.ExpiresAt, row.LastTick = "", false, now, now
	return row, nil
}

// checkHolds refuses unless held is still the resource's live lease at
// tick now.
func checkHolds(row LeaseRow, found bool, held leases.Lease, now int64) error {
	if !found {
		return fmt.Errorf("%w: resource %q was never leased", leases.ErrNotHolder, held.Resource)
	}
	if err := checkNotBackwards(held.Resource, row, now); err != nil {
		return err
	}
	if row.Epoch == held.Epoch && !row.Held {
		return fmt.Errorf("%w: epoch %d of %q was released at tick %d", leases.ErrNotHolder, held.Epoch, held.Resource, row.LastTick)
	}
	if row.Epoch != held.Epoch || row.Holder != held.Holder {
		return fmt.Errorf("%w: %s", leases.ErrNotHolder, Mismatch(row, held, now))
	}
	if !row.LiveAt(now) {
		return fmt.Errorf("%w: epoch %d of %q expired at tick %d", leases.ErrLeaseExpired, row.Epoch, held.Resource, row.ExpiresAt)
	}
	return nil
}

// Mismatch says, for a refusal, whose tenure row holds at tick now where
// held names another (another holder, or another epoch), naming both:
// "r" is held by "A" at epoch 1, not by "B" at epoch 1.
func Mismatch(row LeaseRow, held leases.Lease, now int64) string {
	switch {
	case !row.Held:
		return fmt.Sprintf("%q is free (epoch %d was released), not held by %q at epoch %d",
			held.Resource, row.Epoch, held.Holder, held.Epoch)
	case row.LiveAt(now):
		return fmt.Sprintf("%q is held by %q at epoch %d, not by %q at epoch %d",
			held.Resource, row.Holder, row.Epoch, held.Holder, held.Epoch)
	}
	return fmt.Sprintf("%q was held by %q at epoch %d until tick %d, not by %q at epoch %d",
		held.Resource, row.Holder, row.Epoch, row.ExpiresAt, held.Holder, held.Epoch)
}

func checkNotBackwards(resource string, row LeaseRow, now int64) error {
	if now < row.LastTick {
		return &leases.BackwardsError{Resource: resource, Tick: now, Last: row.LastTick}
	}
	return nil
}

// Write decides what a receiver in mode does with a write of value at
// epoch, given the stored record (found is false while there is none).
func Write(mode leases.Mode, stored leases.Record, found bool, epoch int64, value string) leases.WriteResult {
	outcome := writeOutcome(mode, stored, found, epoch, value)
	if outcome != leases.Accepted {
		return leases.WriteResult{Outcome: outcome, Record: stored}
	}
	return leases.WriteResult{Outcome: outcome, Record: leases.Record{Epoch: epoch, ValueEpoch: epoch, Value: value}}
}

func writeOutcome(mode leases.Mode, stored leases.Record, found bool, epoch int64, value string) leases.Outcome {
	switch {
	case mode == leases.Unfenced, !found, epoch > stored.Epoch:
		return leases.Accepted
	case epoch < stored.Epoch:
		return leases.Stale
	case stored.ValueEpoch < stored.Epoch:
		// The epoch was observed ahead of its holder's first write.
		return leases.Accepted
	case value == stored.Value:
		return leases.Replay
	default:
		return leases.Conflict
	}
}

// Observe decides what a fenced receiver does with an observe of epoch:
// the fence rises (Accepted), is already there (Replay), or is above it
// (Stale).
func Observe(stored leases.Record, found bool, epoch int64) leases.WriteResult {
	switch {
	case found && epoch < stored.Epoch:
		return leases.WriteResult{Outcome: leases.Stale, Record: stored}
	case found && epoch == stored.Epoch:
		return leases.WriteResult{Outcome: leases.Replay, Record: stored}
	}
	stored.Epoch = epoch
	return leases.WriteResult{Outcome: leases.Accepted, Record: stored}
}

// Admit decides a fence's admission of a transaction for the holder of
// epoch, given the stored record: Accepted while no higher epoch has been
// committed (the fence rises to epoch, or is at it already: a tenure runs
// any number of admitted transactions), Stale once one has. The value is
// kept either way.
func Admit(stored leases.Record, found bool, epoch int64) leases.WriteResult {
	if found && epoch < stored.Epoch {
		return leases.WriteResult{Outcome: leases.Stale, Record: stored}
	}
	stored.Epoch = epoch
	return leases.WriteResult{Outcome: leases.Accepted, Record: stored}
}

// Guarded decides a guarded receiver's write of value at tick now by the
// holder of held: NotLive unless held is the authority's live lease for
// its resource at now (row and found are the authority's state, read in
// the same transaction), and otherwise what a fenced receiver does.
func Guarded(row LeaseRow, found bool, held leases.Lease, now int64, stored leases.Record, storedFound bool, value string) (leases.WriteResult, error) {
	live, err := LiveFor(row, found, held, now)
	switch {
	case err != nil:
		return leases.WriteResult{}, err
	case !live:
		return leases.WriteResult{Outcome: leases.NotLive, Record: stored}, nil
	}
	return Write(leases.Fenced, stored, storedFound, held.Epoch, value), nil
}

// LiveFor decides whether held is the authority's live lease at tick now,
// given the resource's row (read in the same transaction): false when the
// row holds another tenure, none, or held's tenure expired or released;
// a refusal (ErrTickBackwards) when held's tenure is the row's and now is
// behind the row's last change.
func LiveFor(row LeaseRow, found bool, held leases.Lease, now int64) (bool, error) {
	if !found || !row.Held || row.Epoch != held.Epoch || row.Holder != held.Holder {
		return false, nil
	}
	if err := checkNotBackwards(held.Resource, row, now); err != nil {
		return false, err
	}
	return row.LiveAt(now), nil
}

// NotLive says why held is not the live lease of row at tick now, as an
// error matching leases.ErrNotLive and, beside it, leases.ErrNotHolder
// (never leased, released, or another tenure's) or leases.ErrLeaseExpired.
func NotLive(row LeaseRow, found bool, held leases.Lease, now int64) error {
	switch {
	case !found:
		return fmt.Errorf("%w (%w): %q was never leased", leases.ErrNotLive, leases.ErrNotHolder, held.Resource)
	case row.Epoch == held.Epoch && !row.Held:
		// Before the holder's comparison: a released row keeps no holder.
		return fmt.Errorf("%w (%w): epoch %d of %q was released", leases.ErrNotLive, leases.ErrNotHolder, held.Epoch, held.Resource)
	case row.Epoch != held.Epoch || row.Holder != held.Holder:
		return fmt.Errorf("%w (%w): %s", leases.ErrNotLive, leases.ErrNotHolder, Mismatch(row, held, now))
	}
	return fmt.Errorf("%w (%w): epoch %d of %q expired at tick %d, %d ms before the check",
		leases.ErrNotLive, leases.ErrLeaseExpired, held.Epoch, held.Resource, row.ExpiresAt, now-row.ExpiresAt)
}

// Stamp returns a function that marks a lease, and the live lease of a
// HeldError in its error, with the ticks of the lessor that returned
// them: Stamp(leases.HostMillis)(l.acquire(...)).
func Stamp(ticks leases.Ticks) func(leases.Lease, error) (leases.Lease, error) {
	return func(lease leases.Lease, err error) (leases.Lease, error) {
		if lease != (leases.Lease{}) {
			lease.Ticks = ticks
		}
		var held *leases.HeldError
		if errors.As(err, &held) {
			held.Live.Ticks = ticks
		}
		return lease, err
	}
}
