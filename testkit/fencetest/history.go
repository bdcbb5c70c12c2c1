package fencetest

import (
	"slices"
	"testing"

	"leases"
	"leases/fence"
)

// checkHistory checks the calls on resource against each other and
// against what the database holds (see Concurrent for the list).
func checkHistory(t *testing.T, db DB, table *fence.Table, resource string, all []call) {
	t.Helper()
	var calls, stored []call
	for _, c := range all {
		if c.resource == resource {
			calls = append(calls, c)
			if c.stored() {
				stored = append(stored, c)
			}
		}
	}
	// fenceBefore is the highest epoch committed before clock tick at.
	fenceBefore := func(at int64) (epoch int64, value bool) {
		for _, s := range stored {
			if s.committed < at && (s.epoch > epoch || s.epoch == epoch && s.writes()) {
				epoch, value = s.epoch, s.writes()
			}
		}
		return epoch, value
	}
	for _, c := range calls {
		if c.err != nil {
			continue
		}
		floor, valueAtFloor := fenceBefore(c.began)
		switch {
		case c.result.Record.Epoch < floor:
			t.Errorf("%s: %s saw fence %d although %d was committed before it began: the fence went down",
				resource, describe(c.step), c.result.Record.Epoch, floor)
		case c.result.Outcome == leases.Accepted && c.epoch < floor:
			t.Errorf("%s: %s accepted although epoch %d was committed before it began", resource, describe(c.step), floor)
		case c.result.Outcome == leases.Accepted && c.epoch == floor && !c.admit && (c.observe || valueAtFloor):
			t.Errorf("%s: %s accepted although epoch %d had been committed %s before it began",
				resource, describe(c.step), floor, map[bool]string{true: "with a value", false: "by an observe"}[valueAtFloor])
		}
		if seen, _ := fenceBefore(c.seenAt); c.seen.Epoch < seen {
			t.Errorf("%s: read fence %d after %d had been committed: the fence went down", resource, c.seen.Epoch, seen)
		}
	}
	valueAt := map[int64]string{}
	want, wantRows := leases.Record{}, []string(nil)
	for _, a := range stored {
		for _, b := range stored {
			if b.committed < a.commitAt && b.epoch > a.epoch {
				t.Errorf("%s: %s committed after %s had: a lower epoch committed after a higher one",
					resource, describe(a.step), describe(b.step))
			}
		}
		want.Epoch = max(want.Epoch, a.epoch)
		if a.observe {
			continue
		}
		if a.admit {
			wantRows = append(wantRows, Row(a.epoch, a.value)) // a tenure's rows: any number per epoch
			continue
		}
		if other, ok := valueAt[a.epoch]; ok {
			t.Errorf("%s: two values committed at epoch %d: %q and %q", resource, a.epoch, other, a.value)
		}
		valueAt[a.epoch] = a.value
		wantRows = append(wantRows, Row(a.epoch, a.value))
		if a.epoch > want.ValueEpoch {
			want.ValueEpoch, want.Value = a.epoch, a.value
		}
	}
	if got, _ := Committed(t, db, table, resource); got != want {
		t.Errorf("%s: the table holds %+v, the committed calls left %+v", resource, got, want)
	}
	slices.Sort(wantRows)
	if rows := BusinessRows(t, db, table, resource); !slices.Equal(rows, wantRows) {
		t.Errorf("%s: business rows %q, the committed accepted writes are %q", resource, rows, wantRows)
	}
}
