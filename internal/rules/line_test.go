package rules

import (
	"testing"

	"leases"
)

func TestAhead(t *testing.T) {
	line := []Waiter{{"gone", 10}, {"B", 30}, {"C", 40}}
	for _, c := range []struct {
		holder string
		now    int64
		ahead  string
		ok     bool
	}{
		{"B", 5, "gone", true}, // an earlier place still runs
		{"B", 10, "", false},   // it ended at 10: B is first
		{"C", 10, "B", true},   // behind B
		{"D", 35, "C", true},   // B's place ended
		{"D", 40, "", false},   // every place ended
		{"gone", 5, "", false}, // first in line
		{"A", 20, "B", true},   // a newcomer goes behind everyone
	} {
		ahead, ok := Ahead(line, c.holder, c.now)
		if ok != c.ok || ok && ahead.Holder != c.ahead {
			t.Errorf("Ahead(%s at %d) = %+v, %v; want %q, %v", c.holder, c.now, ahead, ok, c.ahead, c.ok)
		}
	}
}

func TestPlace(t *testing.T) {
	held := &leases.HeldError{Live: leases.Lease{Holder: "A", ExpiresAt: 100}, At: 50}
	if until, ok := Place("B", held, 20); !ok || until != 120 {
		t.Errorf("B refused by A's lease to 100: place until %d, %v; want 120", until, ok)
	}
	if _, ok := Place("A", held, 20); ok {
		t.Error("A refused by its own lease takes a place; want none")
	}
	if until, ok := Place("A", Queued("r", Waiter{"B", 130}, 100), 20); !ok || until != 150 {
		t.Errorf("A behind B's place to 130: until %d, %v; want 150", until, ok)
	}
	if Refresh(150, 155, 20) || !Refresh(140, 155, 20) || !Refresh(0, 155, 20) {
		t.Error("Refresh: want a write only when less than half the grace is left, or no place")
	}
}
