package sqlitestore

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"leases"
)

// A snapshot that is not one is refused before any table is touched, even
// when its first tables are sound and differ from what the store holds.
func TestRestoreOfABadSnapshotChangesNothing(t *testing.T) {
	ctx := context.Background()
	s, _ := storeWorthProtecting(t)
	empty, err := Open(ctx, ":memory:", Config{BusyTimeout: DefaultBusyTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = empty.Close() })
	sound, err := empty.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var parts []json.RawMessage
	if err := json.Unmarshal(sound, &parts); err != nil {
		t.Fatal(err)
	}
	for _, last := range []string{`[[1]]`, `[["r", 1.5, null, null]]`, `{}`} {
		t.Run(last, func(t *testing.T) {
			parts[len(parts)-1] = json.RawMessage(last)
			bad, err := json.Marshal(parts)
			if err != nil {
				t.Fatal(err)
			}
			before := dump(t, s)
			if err := s.Restore(ctx, bad); !errors.Is(err, leases.ErrInvalidInput) {
				t.Fatalf("restore of a bad snapshot: %v; want ErrInvalidInput", err)
			}
			if after := dump(t, s); after != before {
				t.Fatalf("the store changed:\n%s\nbecame\n%s", before, after)
			}
		})
	}
}

// A restore brings back every row of every table, not only the explorer's
// usual one row per table: three resources here, each changed in every
// table after the snapshot. A part that is JSON null is an empty table.
func TestRestoreBringsBackEveryRow(t *testing.T) {
	ctx := context.Background()
	s, _ := storeWorthProtecting(t) // resource "r" in every table, its lease live until tick 15
	everywhere := func(holder string, tick int64, resources ...string) {
		t.Helper()
		for _, resource := range resources {
			lease, err := s.Authority().Acquire(ctx, resource, holder, tick, 10)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Receiver(leases.Fenced).Write(ctx, resource, lease.Epoch, holder); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Receiver(leases.Unfenced).Write(ctx, resource, lease.Epoch, holder); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Guarded().Write(ctx, lease, tick, holder); err != nil {
				t.Fatal(err)
			}
		}
	}
	everywhere("B", 5, "s", "t")
	want := dump(t, s)
	snapshot, err := s.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	everywhere("C", 20, "r", "s", "t")
	if dump(t, s) == want {
		t.Fatal("nothing changed after the snapshot")
	}
	if err := s.Restore(ctx, snapshot); err != nil {
		t.Fatal(err)
	}
	if got := dump(t, s); got != want {
		t.Fatalf("restored:\n%s\nwant:\n%s", got, want)
	}

	var parts []json.RawMessage
	if err := json.Unmarshal(snapshot, &parts); err != nil {
		t.Fatal(err)
	}
	for i := range parts {
		parts[i] = json.RawMessage(`null`)
	}
	nulls, err := json.Marshal(parts)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Restore(ctx, nulls); err != nil {
		t.Fatal(err)
	}
	if got := dump(t, s); got != "" {
		t.Fatalf("restored from nulls:\n%s\nwant every table empty", got)
	}
}
