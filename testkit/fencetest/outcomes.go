package fencetest

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"testing"

	"leases"
	"leases/fence"
)

// step is one call of the fence, committed or not: a write, an observe,
// or an admit.
type step struct {
	observe bool
	admit   bool
	epoch   int64
	value   string // a write's value; an admitted transaction's business row
}

func write(epoch int64, value string) step { return step{epoch: epoch, value: value} }
func observe(epoch int64) step             { return step{observe: true, epoch: epoch} }

// admit is a transaction of the holder of epoch that stores value in a
// business row once admitted.
func admit(epoch int64, value string) step { return step{admit: true, epoch: epoch, value: value} }

// writes reports whether the step stores a value in the fence row.
func (s step) writes() bool { return !s.observe && !s.admit }

// run calls the fence for s in tx.
func (s step) run(ctx context.Context, table Fence, tx *sql.Tx, resource string) (leases.WriteResult, error) {
	switch {
	case s.observe:
		return table.Observe(ctx, tx, resource, s.epoch)
	case s.admit:
		return table.Admit(ctx, tx, resource, s.epoch)
	}
	return table.Write(ctx, tx, resource, s.epoch, s.value)
}

// Outcomes runs every outcome of Write and Observe, each in a transaction
// that stores a business row when the fence accepted and then commits or
// rolls back, and checks the outcome, the record it reports, and what is
// committed afterwards: the fence row and the business row together, or
// neither.
func Outcomes(t *testing.T, db DB) {
	table := Setup(t, db, "outcomes")
	for _, face := range faces(t, db, table) {
		t.Run(face.name, func(t *testing.T) { outcomes(t, db, table, face.via) })
	}
}

func outcomes(t *testing.T, db DB, table *fence.Table, via Fence) {
	for _, c := range []struct {
		name     string
		before   []step // committed first, one transaction each
		call     step
		rollback bool
		want     leases.WriteResult
		// committed is the record the table holds after the transaction
		// ended (zero: none); business the business rows, "epoch=value".
		committed leases.Record
		business  []string
	}{
		{name: "first write accepted", call: write(1, "a"),
			want: accepted(1, 1, "a"), committed: rec(1, 1, "a"), business: []string{"1=a"}},
		{name: "first write rolled back leaves neither row", call: write(1, "a"), rollback: true,
			want: accepted(1, 1, "a")},
		{name: "higher epoch accepted", before: []step{write(1, "a")}, call: write(2, "b"),
			want: accepted(2, 2, "b"), committed: rec(2, 2, "b"), business: []string{"2=b"}},
		{name: "higher epoch rolled back keeps the old fence", before: []step{write(1, "a")}, call: write(2, "b"), rollback: true,
			want: accepted(2, 2, "b"), committed: rec(1, 1, "a")},
		{name: "same epoch and value is a replay", before: []step{write(2, "b")}, call: write(2, "b"),
			want: result(leases.Replay, 2, 2, "b"), committed: rec(2, 2, "b")},
		{name: "same epoch, other value is a conflict", before: []step{write(2, "b")}, call: write(2, "c"),
			want: result(leases.Conflict, 2, 2, "b"), committed: rec(2, 2, "b")},
		{name: "lower epoch is stale", before: []step{write(2, "b")}, call: write(1, "a"),
			want: result(leases.Stale, 2, 2, "b"), committed: rec(2, 2, "b")},
		{name: "lower epoch is stale after an observe", before: []step{write(1, "a"), observe(2)}, call: write(1, "a2"),
			want: result(leases.Stale, 2, 1, "a"), committed: rec(2, 1, "a")},
		{name: "first write at an observed epoch accepted", before: []step{write(1, "a"), observe(2)}, call: write(2, "b"),
			want: accepted(2, 2, "b"), committed: rec(2, 2, "b"), business: []string{"2=b"}},
		{name: "first write at an epoch observed on an empty row accepted", before: []step{observe(2)}, call: write(2, "b"),
			want: accepted(2, 2, "b"), committed: rec(2, 2, "b"), business: []string{"2=b"}},
		{name: "observe on nothing accepted", call: observe(2),
			want: accepted(2, 0, ""), committed: rec(2, 0, "")},
		{name: "observe rolled back leaves nothing", call: observe(2), rollback: true,
			want: accepted(2, 0, "")},
		{name: "observe higher keeps the value", before: []step{write(1, "a")}, call: observe(3),
			want: accepted(3, 1, "a"), committed: rec(3, 1, "a")},
		{name: "observe rolled back keeps the old fence", before: []step{write(1, "a")}, call: observe(3), rollback: true,
			want: accepted(3, 1, "a"), committed: rec(1, 1, "a")},
		{name: "observe equal is a replay", before: []step{write(2, "b")}, call: observe(2),
			want: result(leases.Replay, 2, 2, "b"), committed: rec(2, 2, "b")},
		{name: "observe lower is stale", before: []step{write(2, "b")}, call: observe(1),
			want: result(leases.Stale, 2, 2, "b"), committed: rec(2, 2, "b")},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := Context(t)
			resource := t.Name() // a row of the test's own
			for _, s := range c.before {
				commit(t, db, func(tx *sql.Tx) {
					if _, err := s.run(ctx, via, tx, resource); err != nil {
						t.Fatal(err)
					}
				})
			}
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.call.run(ctx, via, tx, resource)
			if err != nil {
				t.Fatal(errors.Join(err, tx.Rollback()))
			}
			if got != c.want {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
			if got.Outcome == leases.Accepted && !c.call.observe {
				if err := InsertBusiness(ctx, db, tx, table, resource, c.call.epoch, c.call.value, 0); err != nil {
					t.Fatal(errors.Join(err, tx.Rollback()))
				}
			}
			end := tx.Commit
			if c.rollback {
				end = tx.Rollback
			}
			if err := end(); err != nil {
				t.Fatal(err)
			}
			record, found := Committed(t, db, table, resource)
			if found != (c.committed != leases.Record{}) || record != c.committed {
				t.Errorf("committed: %+v (found %v), want %+v", record, found, c.committed)
			}
			if rows := BusinessRows(t, db, table, resource); !slices.Equal(rows, c.business) {
				t.Errorf("business rows %q, want %q", rows, c.business)
			}
		})
	}
}

func rec(epoch, valueEpoch int64, value string) leases.Record {
	return leases.Record{Epoch: epoch, ValueEpoch: valueEpoch, Value: value}
}

func result(outcome leases.Outcome, epoch, valueEpoch int64, value string) leases.WriteResult {
	return leases.WriteResult{Outcome: outcome, Record: rec(epoch, valueEpoch, value)}
}

func accepted(epoch, valueEpoch int64, value string) leases.WriteResult {
	return result(leases.Accepted, epoch, valueEpoch, value)
}

// commit runs fn in a transaction of its own and commits it.
func commit(t testing.TB, db DB, fn func(tx *sql.Tx)) {
	t.Helper()
	tx, err := db.BeginTx(Context(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }() // after a Fatal in fn
	fn(tx)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// Committed reads the committed record of resource in a transaction of
// its own.
func Committed(t testing.TB, db DB, table *fence.Table, resource string) (record leases.Record, found bool) {
	t.Helper()
	commit(t, db, func(tx *sql.Tx) {
		var err error
		if record, found, err = table.Read(Context(t), tx, resource); err != nil {
			t.Fatal(err)
		}
	})
	return record, found
}
