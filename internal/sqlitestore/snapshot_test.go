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
	empty, err := Open(ctx, ":memory:", DefaultBusyTimeout)
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
