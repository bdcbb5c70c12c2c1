// Package contract is the contract of package leases as tests, written
// against its interfaces only, so that every backend runs the same
// clauses: the root module's contract suite on SQLite, and the etcd
// module's on a three-member cluster. Nothing here knows which backend it
// tests.
//
// A test kit: used by tests only, never by shipped code (the library, the
// evidence as cmd/run-experiment links it, the commands).
package contract

import (
	"context"
	"errors"
	"strings"
	"testing"

	"leases"
)

// Backend is a fresh, empty store of the backend under test.
type Backend struct {
	Authority        leases.Authority
	Fenced, Unfenced leases.Receiver
	Guarded          leases.GuardedReceiver
	Receiver         func(leases.Mode) leases.Receiver // of any mode, valid or not
	// State renders everything the store holds, down to what would show
	// a rewrite of an unchanged value, so that a test can show that a
	// call changed nothing.
	State func(t *testing.T) string
}

// Clauses are every clause, one subtest each.
var Clauses = []struct {
	name string
	run  func(t *testing.T, b Backend)
}{
	{"epochs increase per resource", EpochsIncreasePerResource},
	{"expiry boundary", ExpiryBoundary},
	{"renew extends only the holder's live lease", RenewExtendsOnlyTheHoldersLiveLease},
	{"release never reuses an epoch", ReleaseNeverReusesEpoch},
	{"holder answers who holds", HolderAnswersWhoHolds},
	{"fenced receiver outcomes", FencedReceiverOutcomes},
	{"observe raises the fence and keeps the value", ObserveOutcomes},
	{"unfenced receiver stores whatever comes last", UnfencedReceiverStoresWhateverComesLast},
	{"guarded receiver outcomes", GuardedReceiverOutcomes},
	{"bad input changes nothing", BadInputChangesNothing},
}

// Run runs every clause, each on a fresh store from newBackend.
func Run(t *testing.T, newBackend func(t *testing.T) Backend) {
	for _, clause := range Clauses {
		t.Run(clause.name, func(t *testing.T) { clause.run(t, newBackend(t)) })
	}
}

// step is one call in a scripted run of an authority and what it must
// give. Scripts interleave two resources, so that every step also shows
// it left the other alone.
type step struct {
	name     string
	op       string // "acquire", "renew" or "release"
	resource string // acquire
	holder   string // acquire
	lease    string // renew, release: the saved lease to use; "~x" is x with holder "B"
	tick     int64
	ttl      int64 // acquire, renew
	want     leases.Lease
	wantErr  error  // the sentinel the call must match; nil: it must succeed
	save     string // keep the lease the call returns under this name
}

// script runs steps in order against b's authority. A refused step must
// leave the store as it was.
func script(t *testing.T, b Backend, steps []step) {
	t.Helper()
	ctx := context.Background()
	saved := map[string]leases.Lease{}
	for i, s := range steps {
		held := saved[strings.TrimPrefix(s.lease, "~")]
		if strings.HasPrefix(s.lease, "~") {
			held.Holder = "B"
		}
		before := b.State(t)
		var got leases.Lease
		var err error
		switch s.op {
		case "acquire":
			got, err = b.Authority.Acquire(ctx, s.resource, s.holder, s.tick, s.ttl)
		case "renew":
			got, err = b.Authority.Renew(ctx, held, s.tick, s.ttl)
		case "release":
			err = b.Authority.Release(ctx, held, s.tick)
		default:
			t.Fatalf("step %d: unknown operation %q", i+1, s.op)
		}
		switch {
		case s.wantErr != nil:
			if !errors.Is(err, s.wantErr) || got != (leases.Lease{}) {
				t.Fatalf("step %d (%s): %+v, %v; want no lease and %v", i+1, s.name, got, err, s.wantErr)
			}
			if after := b.State(t); after != before {
				t.Fatalf("step %d (%s): a refusal changed the store:\n%s\nbecame\n%s", i+1, s.name, before, after)
			}
		case err != nil:
			t.Fatalf("step %d (%s): %v", i+1, s.name, err)
		case s.op != "release" && got != s.want:
			t.Fatalf("step %d (%s): got %+v, want %+v", i+1, s.name, got, s.want)
		}
		if s.save != "" {
			saved[s.save] = got
		}
	}
}

// LeaseOf is the lease a step expects.
func LeaseOf(resource, holder string, epoch, grantedAt, expiresAt int64) leases.Lease {
	return leases.Lease{Resource: resource, Holder: holder, Epoch: epoch, GrantedAt: grantedAt, ExpiresAt: expiresAt}
}

// Written is the record a write of value at epoch leaves behind.
func Written(epoch int64, value string) leases.Record {
	return leases.Record{Epoch: epoch, ValueEpoch: epoch, Value: value}
}

// MustWrite writes and fails the test on an error.
func MustWrite(t *testing.T, r leases.Receiver, resource string, epoch int64, value string) leases.WriteResult {
	t.Helper()
	result, err := r.Write(context.Background(), resource, epoch, value)
	if err != nil {
		t.Fatalf("write %s epoch %d: %v", resource, epoch, err)
	}
	return result
}
