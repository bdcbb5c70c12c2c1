package fencetest

import (
	"database/sql"
	"fmt"
	"testing"

	"leases"
	"leases/fence"
	"leases/internal/rules"
)

// Rule holds the fence's SQL to the receiver rule: for every shape of the
// stored row (none; a value at the fence's epoch; a value below it, or
// none, after an observe) and every call (a write at a lower, equal or
// higher epoch with the same or another value; an observe or an admit at
// those epochs), the fence answers what rules.Write, rules.Observe or
// rules.Admit decide over the same row, and commits exactly the record it
// reports.
func Rule(t *testing.T, db DB) {
	table := Setup(t, db, "rule")
	for _, face := range faces(t, db, table) {
		t.Run(face.name, func(t *testing.T) { rule(t, db, table, face.via) })
	}
}

func rule(t *testing.T, db DB, table *fence.Table, via Fence) {
	const fenceEpoch = 2
	type stored struct {
		name  string
		found bool
		leases.Record
	}
	for _, s := range []stored{
		{name: "no row"},
		{name: "value at the fence", found: true, Record: rec(fenceEpoch, fenceEpoch, "v")},
		{name: "value below the fence", found: true, Record: rec(fenceEpoch, fenceEpoch-1, "v")},
		{name: "no value below the fence", found: true, Record: rec(fenceEpoch, 0, "")},
	} {
		for _, epoch := range []int64{fenceEpoch - 1, fenceEpoch, fenceEpoch + 1} {
			for _, call := range []step{write(epoch, "v"), write(epoch, "w"), observe(epoch), admit(epoch, "")} {
				name := fmt.Sprintf("%s, %s", s.name, describe(call))
				t.Run(name, func(t *testing.T) {
					ctx := Context(t)
					resource := t.Name()
					if s.found {
						putRow(t, db, table.Name(), resource, s.Record)
					}
					want := rules.Write(leases.Fenced, s.Record, s.found, call.epoch, call.value)
					switch {
					case call.observe:
						want = rules.Observe(s.Record, s.found, call.epoch)
					case call.admit:
						want = rules.Admit(s.Record, s.found, call.epoch)
					}
					var got leases.WriteResult
					commit(t, db, func(tx *sql.Tx) {
						var err error
						if got, err = call.run(ctx, via, tx, resource); err != nil {
							t.Fatal(err)
						}
					})
					if got != want {
						t.Errorf("fence: %+v, rule: %+v", got, want)
					}
					if record, _ := Committed(t, db, table, resource); record != want.Record {
						t.Errorf("committed %+v, the rule's record is %+v", record, want.Record)
					}
				})
			}
		}
	}
}

func describe(s step) string {
	switch {
	case s.observe:
		return fmt.Sprintf("observe %d", s.epoch)
	case s.admit:
		return fmt.Sprintf("admit %d", s.epoch)
	}
	return fmt.Sprintf("write %d %q", s.epoch, s.value)
}

// putRow stores a row of any shape the schema allows, past the fence.
func putRow(t *testing.T, db DB, table, resource string, r leases.Record) {
	t.Helper()
	valueEpoch, value := sql.NullInt64{Int64: r.ValueEpoch, Valid: r.ValueEpoch > 0}, sql.NullString{String: r.Value, Valid: r.ValueEpoch > 0}
	if _, err := db.ExecContext(Context(t), db.SQL(`INSERT INTO `+table+` (resource, epoch, value_epoch, value) VALUES ($1, $2, $3, $4)`),
		resource, r.Epoch, valueEpoch, value); err != nil {
		t.Fatal(err)
	}
}
