package leases_test

// Beyond the seed: the guarded receiver, which checks the writer's lease in
// the write's own transaction. Not among the contract's 17 tests.

import (
	"context"
	"errors"
	"testing"

	"leases"
)

func TestGuardedReceiverOutcomes(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		// setup prepares the store and returns the lease the write uses
		// and the tick it writes at.
		setup      func(t *testing.T, auth leases.Authority, g leases.GuardedReceiver) (leases.Lease, int64)
		value      string
		want       leases.Outcome
		wantRecord leases.Record
		wantErr    error
	}{
		{"a live lease writes", func(t *testing.T, auth leases.Authority, _ leases.GuardedReceiver) (leases.Lease, int64) {
			return mustAcquire(t, auth, "r", "A", 0, 3), 2
		}, "a", leases.Accepted, written(1, "a"), nil},
		{"not at the expiry tick", func(t *testing.T, auth leases.Authority, _ leases.GuardedReceiver) (leases.Lease, int64) {
			return mustAcquire(t, auth, "r", "A", 0, 3), 3
		}, "a", leases.NotLive, leases.Record{}, nil},
		{"the gap's old holder, before the new one writes", func(t *testing.T, auth leases.Authority, _ leases.GuardedReceiver) (leases.Lease, int64) {
			a := mustAcquire(t, auth, "r", "A", 0, 3)
			mustAcquire(t, auth, "r", "B", 3, 3)
			return a, 3
		}, "a", leases.NotLive, leases.Record{}, nil},
		{"released", func(t *testing.T, auth leases.Authority, _ leases.GuardedReceiver) (leases.Lease, int64) {
			a := mustAcquire(t, auth, "r", "A", 0, 3)
			if err := auth.Release(ctx, a, 1); err != nil {
				t.Fatal(err)
			}
			return a, 1
		}, "a", leases.NotLive, leases.Record{}, nil},
		{"another holder's name", func(t *testing.T, auth leases.Authority, _ leases.GuardedReceiver) (leases.Lease, int64) {
			a := mustAcquire(t, auth, "r", "A", 0, 3)
			a.Holder = "B"
			return a, 1
		}, "a", leases.NotLive, leases.Record{}, nil},
		{"a lease on another resource", func(t *testing.T, auth leases.Authority, _ leases.GuardedReceiver) (leases.Lease, int64) {
			mustAcquire(t, auth, "other", "A", 0, 3)
			return leaseOf("r", "A", 1, 0, 3), 1
		}, "a", leases.NotLive, leases.Record{}, nil},
		{"the same value again: replay", func(t *testing.T, auth leases.Authority, g leases.GuardedReceiver) (leases.Lease, int64) {
			a := mustAcquire(t, auth, "r", "A", 0, 3)
			mustGuardedWrite(t, g, a, 1, "a")
			return a, 2
		}, "a", leases.Replay, written(1, "a"), nil},
		{"another value at the epoch: conflict", func(t *testing.T, auth leases.Authority, g leases.GuardedReceiver) (leases.Lease, int64) {
			a := mustAcquire(t, auth, "r", "A", 0, 3)
			mustGuardedWrite(t, g, a, 1, "a")
			return a, 2
		}, "other", leases.Conflict, written(1, "a"), nil},
		{"the next holder's first write", func(t *testing.T, auth leases.Authority, g leases.GuardedReceiver) (leases.Lease, int64) {
			a := mustAcquire(t, auth, "r", "A", 0, 3)
			mustGuardedWrite(t, g, a, 1, "a")
			return mustAcquire(t, auth, "r", "B", 3, 3), 4
		}, "b", leases.Accepted, written(2, "b"), nil},
		{"a tick before the lease's last change", func(t *testing.T, auth leases.Authority, _ leases.GuardedReceiver) (leases.Lease, int64) {
			a := mustAcquire(t, auth, "r", "A", 0, 3)
			renewed, err := auth.Renew(ctx, a, 2, 3)
			if err != nil {
				t.Fatal(err)
			}
			return renewed, 1
		}, "a", "", leases.Record{}, leases.ErrTickBackwards},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			store := newStore(t)
			auth, g := store.Authority(), store.Guarded()
			held, now := tc.setup(t, auth, g)
			got, err := g.Write(ctx, held, now, tc.value)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("guarded write: %+v, %v; want %v", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got.Outcome != tc.want || got.Record != tc.wantRecord {
				t.Fatalf("guarded write: %+v, %v; want %s leaving %+v", got, err, tc.want, tc.wantRecord)
			}
			stored, _, err := g.Read(ctx, "r")
			if err != nil || stored != tc.wantRecord {
				t.Fatalf("stored %+v, %v; want %+v", stored, err, tc.wantRecord)
			}
		})
	}
}

func mustGuardedWrite(t *testing.T, g leases.GuardedReceiver, held leases.Lease, now int64, value string) leases.WriteResult {
	t.Helper()
	result, err := g.Write(context.Background(), held, now, value)
	if err != nil {
		t.Fatalf("guarded write %+v at %d: %v", held, now, err)
	}
	return result
}
