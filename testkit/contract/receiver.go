package contract

import (
	"context"
	"errors"
	"testing"

	"leases"
)

// FencedReceiverOutcomes: every outcome of the fenced receiver, with the stored record unchanged
// on replay, conflict and stale, and another resource's record left alone.
func FencedReceiverOutcomes(t *testing.T, b Backend) {
	ctx := context.Background()
	stored := Written(2, "v2")
	bystander := MustWrite(t, b.Fenced, "other", 9, "kept").Record
	cases := []struct {
		name     string
		resource string
		empty    bool
		epoch    int64
		value    string
		want     leases.Outcome
	}{
		{"first write to an empty receiver", "r1", true, 1, "v1", leases.Accepted},
		{"higher epoch", "r2", false, 3, "v3", leases.Accepted},
		{"equal epoch and value: replay", "r3", false, 2, "v2", leases.Replay},
		{"equal epoch, other value: conflict", "r4", false, 2, "other", leases.Conflict},
		{"lower epoch: stale", "r5", false, 1, "v1", leases.Stale},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.empty {
				MustWrite(t, b.Fenced, tc.resource, stored.Epoch, stored.Value)
			}
			before := b.State(t)
			got := MustWrite(t, b.Fenced, tc.resource, tc.epoch, tc.value)
			if got.Outcome != tc.want || got.Outcome.Stored() != (tc.want == leases.Accepted) {
				t.Fatalf("outcome %s (stored %v), want %s", got.Outcome, got.Outcome.Stored(), tc.want)
			}
			want := stored
			if tc.want == leases.Accepted {
				want = Written(tc.epoch, tc.value)
			} else if after := b.State(t); after != before {
				t.Errorf("a %s write changed the store:\n%s\nbecame\n%s", got.Outcome, before, after)
			}
			read, found, err := b.Fenced.Read(ctx, tc.resource)
			if err != nil || !found || read != want || got.Record != want {
				t.Errorf("stored %+v (found %v, %v), reported %+v; want %+v", read, found, err, got.Record, want)
			}
			if other, _, err := b.Fenced.Read(ctx, "other"); err != nil || other != bystander {
				t.Errorf("another resource's record became %+v, %v; want %+v", other, err, bystander)
			}
		})
	}
	if _, found, err := b.Fenced.Read(ctx, "never-written"); err != nil || found {
		t.Errorf("read of a resource never written: found %v, %v", found, err)
	}
}

// ObserveOutcomes: observe raises the fence without a value (Accepted), is a replay at the
// fence, and stale below it; the stored value stays, and the first write
// at the observed epoch is accepted.
func ObserveOutcomes(t *testing.T, b Backend) {
	ctx := context.Background()
	observe := func(resource string, epoch int64, want leases.Outcome, record leases.Record) {
		t.Helper()
		before := b.State(t)
		got, err := b.Fenced.Fence(ctx, resource, epoch)
		if err != nil || got.Outcome != want || got.Record != record {
			t.Fatalf("observe %s at %d: %+v, %v; want %s with %+v", resource, epoch, got, err, want, record)
		}
		if after := b.State(t); want != leases.Accepted && after != before {
			t.Fatalf("a %s observe changed the store:\n%s\nbecame\n%s", want, before, after)
		}
	}
	observe("empty", 3, leases.Accepted, leases.Record{Epoch: 3})
	if got := MustWrite(t, b.Fenced, "empty", 2, "late"); got.Outcome != leases.Stale {
		t.Fatalf("write below an observed fence: %s, want stale", got.Outcome)
	}
	MustWrite(t, b.Fenced, "r", 1, "v1")
	observe("r", 2, leases.Accepted, leases.Record{Epoch: 2, ValueEpoch: 1, Value: "v1"})
	observe("r", 2, leases.Replay, leases.Record{Epoch: 2, ValueEpoch: 1, Value: "v1"})
	observe("r", 1, leases.Stale, leases.Record{Epoch: 2, ValueEpoch: 1, Value: "v1"})
	if got := MustWrite(t, b.Fenced, "r", 1, "old"); got.Outcome != leases.Stale {
		t.Fatalf("write at epoch 1 after observe 2: %s, want stale", got.Outcome)
	}
	if got := MustWrite(t, b.Fenced, "r", 2, "v2"); got.Outcome != leases.Accepted || got.Record != Written(2, "v2") {
		t.Fatalf("first write at the observed epoch: %+v, want accepted", got)
	}
	if _, err := b.Unfenced.Fence(ctx, "r", 3); !errors.Is(err, leases.ErrInvalidInput) {
		t.Fatalf("observe on the unfenced receiver: %v, want ErrInvalidInput", err)
	}
}

// UnfencedReceiverStoresWhateverComesLast: without the comparison,
// whatever comes last wins. The unfenced receiver
// keeps its records apart: nothing written through it can lower the
// fenced receiver's fence.
func UnfencedReceiverStoresWhateverComesLast(t *testing.T, b Backend) {
	ctx := context.Background()
	MustWrite(t, b.Fenced, "r", 5, "fenced")
	for _, w := range []struct {
		epoch int64
		value string
	}{{2, "new"}, {2, "another"}, {1, "old"}} {
		if got := MustWrite(t, b.Unfenced, "r", w.epoch, w.value); got.Outcome != leases.Accepted || got.Record != Written(w.epoch, w.value) {
			t.Fatalf("unfenced write epoch %d: %+v, want accepted and stored", w.epoch, got)
		}
	}
	if got, found, err := b.Unfenced.Read(ctx, "r"); err != nil || !found || got != Written(1, "old") {
		t.Fatalf("stored %+v, %v; want the last write (epoch 1, old)", got, err)
	}
	if got := MustWrite(t, b.Fenced, "r", 4, "late"); got.Outcome != leases.Stale || got.Record != Written(5, "fenced") {
		t.Fatalf("fenced write at epoch 4 after unfenced writes: %+v; want stale against epoch 5", got)
	}
	if _, err := b.Fenced.Fence(ctx, "r", 9); err != nil {
		t.Fatal(err)
	}
	MustWrite(t, b.Unfenced, "r", 1, "lower")
	if got, _, err := b.Fenced.Read(ctx, "r"); err != nil || got.Epoch != 9 {
		t.Fatalf("fenced record %+v, %v after an unfenced write; want the fence at 9", got, err)
	}
}

// GuardedReceiverOutcomes: a guarded write is accepted only while the writer's lease is the
// authority's live lease at the write's tick, and then as a fenced
// receiver would; every other outcome changes nothing.
func GuardedReceiverOutcomes(t *testing.T, b Backend) {
	ctx := context.Background()
	a, err := b.Authority.Acquire(ctx, "r", "A", 10, 5) // live at ticks 10..14
	if err != nil {
		t.Fatal(err)
	}
	other, err := b.Authority.Acquire(ctx, "other", "A", 10, 100)
	if err != nil {
		t.Fatal(err)
	}
	impostor := a
	impostor.Holder = "B"
	never := LeaseOf("never-leased", "A", 1, 0, 100)
	steps := []struct {
		name    string
		held    leases.Lease
		now     int64
		value   string
		want    leases.Outcome
		record  leases.Record // reported and stored after the call
		wantErr error
	}{
		{"A's first write", a, 10, "a1", leases.Accepted, Written(1, "a1"), nil},
		{"the same again: replay", a, 11, "a1", leases.Replay, Written(1, "a1"), nil},
		{"another value at the same epoch: conflict", a, 12, "a2", leases.Conflict, Written(1, "a1"), nil},
		{"the last live tick", a, 14, "a1", leases.Replay, Written(1, "a1"), nil},
		{"at the expiry tick: not live", a, 15, "late", leases.NotLive, Written(1, "a1"), nil},
		{"a holder that was never granted it", impostor, 12, "b", leases.NotLive, Written(1, "a1"), nil},
		{"a resource never leased", never, 12, "x", leases.NotLive, leases.Record{}, nil},
		{"a tick before the lease's last change", other, 9, "x", "", leases.Record{}, leases.ErrTickBackwards},
	}
	for _, s := range steps {
		before := b.State(t)
		got, err := b.Guarded.Write(ctx, s.held, s.now, s.value)
		if s.wantErr != nil {
			if !errors.Is(err, s.wantErr) {
				t.Fatalf("%s: %+v, %v; want %v", s.name, got, err, s.wantErr)
			}
		} else if err != nil || got.Outcome != s.want || got.Record != s.record || got.Outcome.Stored() != (s.want == leases.Accepted) {
			t.Fatalf("%s: %+v, %v; want %s with %+v", s.name, got, err, s.want, s.record)
		}
		if after := b.State(t); s.want != leases.Accepted && after != before {
			t.Fatalf("%s changed the store:\n%s\nbecame\n%s", s.name, before, after)
		}
	}
	// A new holder's lease supersedes A's, and B's write is accepted over
	// A's value; A is then not live however early its tick.
	bLease, err := b.Authority.Acquire(ctx, "r", "B", 15, 5)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := b.Guarded.Write(ctx, bLease, 15, "b1"); err != nil || got.Outcome != leases.Accepted || got.Record != Written(2, "b1") {
		t.Fatalf("B's write: %+v, %v; want accepted at epoch 2", got, err)
	}
	if got, err := b.Guarded.Write(ctx, a, 15, "a-late"); err != nil || got.Outcome != leases.NotLive || got.Record != Written(2, "b1") {
		t.Fatalf("A's write after B's grant: %+v, %v; want not-live", got, err)
	}
	if err := b.Authority.Release(ctx, bLease, 16); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Guarded.Write(ctx, bLease, 16, "b2"); err != nil || got.Outcome != leases.NotLive {
		t.Fatalf("B's write after its release: %+v, %v; want not-live", got, err)
	}
	if got, found, err := b.Guarded.Read(ctx, "r"); err != nil || !found || got != Written(2, "b1") {
		t.Fatalf("guarded record %+v (found %v), %v; want B's epoch-2 value", got, found, err)
	}
	if _, found, err := b.Guarded.Read(ctx, "never-leased"); err != nil || found {
		t.Fatalf("guarded read of a resource never written: found %v, %v", found, err)
	}
	// The guarded records are apart from the fenced receiver's.
	if _, found, err := b.Fenced.Read(ctx, "r"); err != nil || found {
		t.Fatalf("a guarded write showed in the fenced receiver: found %v, %v", found, err)
	}
}
