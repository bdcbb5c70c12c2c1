// Package leasestest checks that a backend of package leases keeps the
// contract, as testing/fstest checks a file system and testing/slogtest a
// handler: epochs that strictly increase and are never reused, the expiry
// boundary, refusals that name what happened and change nothing, the
// receivers' outcomes, the lessor, and the guard of a holder's
// transactions. Every backend of this module's repository runs it
// (SQLite, PostgreSQL, etcd); a backend written elsewhere runs it from a
// test of its own, on fresh stores that it makes:
//
//	func TestContract(t *testing.T) {
//		leasestest.Run(t, func(t *testing.T) leasestest.Backend {
//			s := openStore(t) // a fresh, empty store, closed when t ends
//			return leasestest.Backend{
//				Authority: s.Authority(),
//				State:     s.Dump,
//				Fenced:    s.Receiver(leases.Fenced),
//				Unfenced:  s.Receiver(leases.Unfenced),
//			}
//		})
//	}
//
// Each clause is a subtest named for it (see [Clause]), on a store of its
// own. A clause that needs a part the backend has not given (a nil field
// of [Backend]) is skipped. [Check] is the same suite as an error that
// names each clause broken, for a test that wants to see a backend fail.
//
// The suite picks its own resource and holder names ("r", "A") and ticks
// (from 0 on), and reads nothing but what the backend's interfaces answer
// and what Backend.State renders.
package leasestest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"leases"
	"leases/fence"
)

// Backend is one fresh, empty store of the backend under test, as the
// suite sees it. Authority and State are required; every other field may
// be left nil, and the clauses that need it are then skipped.
type Backend struct {
	// Authority is the store's authority with explicit ticks: the
	// contract's model, on which the clauses decide to the tick.
	Authority leases.Authority
	// State renders everything the store holds, down to what would show
	// a rewrite of an unchanged value (a row's transaction, a key's
	// revision), so that the suite can show that a refused call changed
	// nothing. It includes the guard's tables, and what Work writes. A
	// Lessor that keeps its waiters in line (a refused Acquire takes a
	// place, which changes no lease) leaves the line out.
	State func(ctx context.Context) (string, error)

	// Fenced and Unfenced are the store's receivers of each mode, and
	// Guarded its guarded receiver: the contract's model of what a
	// lease alone does not prevent.
	Fenced, Unfenced leases.Receiver
	Guarded          leases.GuardedReceiver

	// Lessor is the store's lessor (Store.Lessor()), on the store's
	// clock.
	Lessor leases.Lessor
	// Expire returns once lease, granted by Lessor, has expired on the
	// Lessor's clock: it advances a manual clock to lease.ExpiresAt, or
	// waits for the server's clock to pass it. Nil leaves out the checks
	// of expired leases.
	Expire func(ctx context.Context, lease leases.Lease) error

	// Guard begins the tenures of the Lessor's leases (of the
	// Authority's, when Lessor is nil), whose transactions the suite runs
	// through fence.Tenure.Tx.
	Guard fence.Guard
	// GuardChecksLive says that Guard also refuses a lease no longer live
	// on the Lessor's clock with leases.ErrNotLive, as a store that keeps
	// the leases in the guard's database does (sqlite.Store,
	// postgres.Store); false for a fence table, which checks the epoch
	// alone. It needs Lessor.
	GuardChecksLive bool
	// Work is a tenure's business work inside its transaction, such as
	// an INSERT that State shows; nil runs transactions that do nothing
	// but the guard's own admission.
	Work func(ctx context.Context, tx *sql.Tx, lease leases.Lease) error
}

// Clause is one clause of the contract: the name of its subtest in Run,
// and of its failures in Check.
type Clause string

// The clauses, in the order Run and Check take them.
const (
	// Epochs: epochs strictly increase per resource, resources do not
	// share a sequence, and a holder that comes back gets a new epoch,
	// its old lease no longer its own.
	Epochs Clause = "epochs increase per resource"
	// Expiry: a lease granted at t for d ticks is live at t+d-1 and
	// expired at t+d; the refusal is a *leases.HeldError naming the
	// holder and the expiry tick.
	Expiry Clause = "expiry boundary"
	// Renewal: a renewal extends the holder's live lease under the same
	// epoch, never to an earlier expiry; nobody else can renew it, nor
	// anybody an expired lease.
	Renewal Clause = "renew extends only the holder's live lease"
	// Release: a release frees the resource at once, and its epoch is
	// never granted again.
	Release Clause = "release never reuses an epoch"
	// Query: Authority.Lease and Live answer the live lease at a tick,
	// and change nothing.
	Query Clause = "lease answers who holds"
	// FencedOutcomes: the fenced receiver's Accepted, Replay, Conflict
	// and Stale, the record unchanged by all but Accepted.
	FencedOutcomes Clause = "fenced receiver outcomes"
	// FenceOutcomes: Receiver.Fence raises the fence without a value and
	// keeps the stored one; an unfenced receiver refuses it.
	FenceOutcomes Clause = "fence raises the epoch and keeps the value"
	// UnfencedOutcomes: the unfenced receiver stores whatever comes last,
	// apart from the fenced receiver's records.
	UnfencedOutcomes Clause = "unfenced receiver stores whatever comes last"
	// GuardedOutcomes: the guarded receiver accepts a write only while
	// the writer's lease is live (NotLive otherwise), and then as a
	// fenced receiver would.
	GuardedOutcomes Clause = "guarded receiver outcomes"
	// BadInput: every bad argument (a name the one rule for names
	// refuses, a tick below 0, an epoch below 1, a ttl below 1, a value
	// too long) is refused with leases.ErrInvalidInput in one line and
	// changes nothing; a tick behind the lease's last change is a
	// *leases.BackwardsError instead, a refusal but not bad input.
	BadInput Clause = "bad input changes nothing"
	// Lessor: the lessor grants, refuses a held lease, renews and
	// releases, never granting an epoch twice, and a waiter on Changed
	// learns of a release.
	Lessor Clause = "lessor grants, renews and releases"
	// Listing: Lessor.Live lists the live leases in the byte order of
	// their resources.
	Listing Clause = "lessor lists the live leases"
	// LessorBadInput: every entry point of the lessor refuses each of
	// BadNames with leases.ErrInvalidInput and changes nothing.
	LessorBadInput Clause = "lessor refuses bad names"
	// Tenure: once a newer tenure has begun, an older tenure's
	// transaction commits nothing (leases.ErrStale, or leases.ErrNotLive
	// from a guard that checks the lease), nor does one whose lease has
	// expired or was released, where the guard checks the lease.
	Tenure Clause = "guard refuses an older tenure"
)

// clause is a Clause's check, and what it needs of a backend.
type clause struct {
	name  Clause
	lacks func(b Backend) string // the part b lacks, or ""
	check func(ctx context.Context, b Backend) error
}

// suite is every clause, in order.
var suite = []clause{
	{Epochs, nil, checkEpochs},
	{Expiry, nil, checkExpiry},
	{Renewal, nil, checkRenewal},
	{Release, nil, checkRelease},
	{Query, nil, checkQuery},
	{FencedOutcomes, needs("Fenced", func(b Backend) bool { return b.Fenced != nil }), checkFencedOutcomes},
	{FenceOutcomes, needs("Fenced", func(b Backend) bool { return b.Fenced != nil }), checkFenceOutcomes},
	{UnfencedOutcomes, needs("Fenced and Unfenced", func(b Backend) bool { return b.Fenced != nil && b.Unfenced != nil }), checkUnfencedOutcomes},
	{GuardedOutcomes, needs("Guarded", func(b Backend) bool { return b.Guarded != nil }), checkGuardedOutcomes},
	{BadInput, nil, checkBadInput},
	{Lessor, needs("Lessor", func(b Backend) bool { return b.Lessor != nil }), checkLessor},
	{Listing, needs("Lessor", func(b Backend) bool { return b.Lessor != nil }), checkListing},
	{LessorBadInput, needs("Lessor", func(b Backend) bool { return b.Lessor != nil }), checkLessorBadInput},
	{Tenure, needs("Guard", func(b Backend) bool { return b.Guard != nil }), checkTenure},
}

// needs is a clause's lacks: part, unless has.
func needs(part string, has func(Backend) bool) func(Backend) string {
	return func(b Backend) string {
		if has(b) {
			return ""
		}
		return part
	}
}

// Run runs each of clauses (every clause, when none is named) as a
// subtest of t named for it, on a fresh backend that newBackend makes for
// that subtest; a clause whose parts the backend has not given is
// skipped, saying which. Every wait of the suite is bounded by t's
// deadline.
func Run(t *testing.T, newBackend func(t *testing.T) Backend, clauses ...Clause) {
	t.Helper()
	chosen, err := choose(clauses)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range chosen {
		t.Run(string(c.name), func(t *testing.T) {
			b := newBackend(t)
			if err := b.valid(); err != nil {
				t.Fatal(err)
			}
			if part := lacks(c, b); part != "" {
				t.Skipf("the backend gives no %s", part)
			}
			if err := c.check(bounded(t), b); err != nil {
				t.Error(err)
			}
		})
	}
}

// Check runs each of clauses (every clause, when none is named), in order,
// each on a fresh backend from newBackend, and returns the failures
// joined, each line naming its clause: nil when the backend keeps every
// one. A clause whose parts the backend has not given is left out. The
// backends are the caller's to close.
func Check(ctx context.Context, newBackend func() (Backend, error), clauses ...Clause) error {
	chosen, err := choose(clauses)
	if err != nil {
		return err
	}
	var errs []error
	for _, c := range chosen {
		b, err := newBackend()
		if err == nil {
			err = b.valid()
		}
		if err == nil && lacks(c, b) == "" {
			err = c.check(ctx, b)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.name, err))
		}
	}
	return errors.Join(errs...)
}

// choose is the clauses named, in the suite's order, or all of them.
func choose(names []Clause) ([]clause, error) {
	if len(names) == 0 {
		return suite, nil
	}
	var chosen []clause
	for _, c := range suite {
		for _, name := range names {
			if c.name == name {
				chosen = append(chosen, c)
				break
			}
		}
	}
	for _, name := range names {
		if !known(name) {
			return nil, fmt.Errorf("leasestest: no clause %q", name)
		}
	}
	return chosen, nil
}

func known(name Clause) bool {
	for _, c := range suite {
		if c.name == name {
			return true
		}
	}
	return false
}

// lacks is the part of b that c needs and b has not, or "".
func lacks(c clause, b Backend) string {
	if c.lacks == nil {
		return ""
	}
	return c.lacks(b)
}

// valid is an error when b lacks a required part.
func (b Backend) valid() error {
	switch {
	case b.Authority == nil:
		return errors.New("leasestest: Backend.Authority is nil")
	case b.State == nil:
		return errors.New("leasestest: Backend.State is nil")
	case b.GuardChecksLive && b.Lessor == nil:
		return errors.New("leasestest: Backend.GuardChecksLive needs Backend.Lessor, on whose clock the guard checks")
	}
	return nil
}

// bounded is a context that ends with t, or a little before t's
// deadline (a tenth of the time left), so that a hang fails with the
// suite's message rather than the test binary's timeout.
func bounded(t *testing.T) context.Context {
	deadline, ok := t.Deadline()
	if !ok {
		return t.Context()
	}
	ctx, cancel := context.WithDeadline(t.Context(), deadline.Add(-time.Until(deadline)/10))
	t.Cleanup(cancel)
	return ctx
}
