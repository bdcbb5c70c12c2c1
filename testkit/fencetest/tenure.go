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

// Tenures runs a tenure's life on the fence: any number of transactions
// per tenure, each committing its business rows; a newer tenure that
// begins refuses every later transaction of the older one (and its
// beginning again) with ErrSuperseded, before the newer holder has written
// anything; a transaction whose function fails, or whose context ends
// before the commit, commits nothing and says so, neither being an
// unknown outcome.
func Tenures(t *testing.T, db DB) {
	table := Setup(t, db, "tenures")
	for _, face := range faces(t, db, table) {
		t.Run(face.name, func(t *testing.T) { tenures(t, db, table, face) })
	}
}

func tenures(t *testing.T, db DB, table *fence.Table, face face) {
	ctx := Context(t)
	resource := t.Name()
	begin := func(epoch int64) (*fence.Tenure, error) {
		lease := Lease(resource, epoch)
		return face.via.Tenure(ctx, lease)
	}
	row := func(tn *fence.Tenure, value string) func(tx *sql.Tx) error {
		return func(tx *sql.Tx) error { return InsertBusiness(ctx, db, tx, table, resource, tn.Epoch(), value, 0) }
	}
	a, err := begin(1)
	if err != nil {
		t.Fatal(err)
	}
	for _, value := range []string{"a1", "a2", "a3"} {
		if err := a.Tx(ctx, nil, row(a, value)); err != nil {
			t.Fatalf("tenure 1, transaction %s: %v", value, err)
		}
	}
	if again, err := begin(1); err != nil || again.Epoch() != 1 {
		t.Fatalf("tenure 1 begun again (a restarted holder): %v", err)
	}
	b, err := begin(2) // the newer holder begins, and has written nothing yet
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Tx(ctx, nil, row(a, "late")); !errors.Is(err, leases.ErrStale) || !leases.IsRefusal(err) {
		t.Fatalf("tenure 1 after tenure 2 began: %v; want ErrStale", err)
	}
	if _, err := begin(1); !errors.Is(err, leases.ErrStale) {
		t.Fatalf("tenure 1 begun after tenure 2: %v; want ErrStale", err)
	}
	failed := errors.New("the work failed")
	if err := b.Tx(ctx, nil, func(tx *sql.Tx) error {
		if err := row(b, "rolled back")(tx); err != nil {
			return err
		}
		return failed
	}); !errors.Is(err, failed) || errors.Is(err, leases.ErrOutcomeUnknown) {
		t.Fatalf("a failing transaction: %v; want its error", err)
	}
	ended, end := context.WithCancel(ctx)
	if err := b.Tx(ended, nil, func(tx *sql.Tx) error {
		err := row(b, "lease ended")(tx)
		end() // the session ends while the transaction is open
		return err
	}); !errors.Is(err, context.Canceled) || errors.Is(err, leases.ErrOutcomeUnknown) {
		t.Fatalf("a transaction whose context ended before the commit: %v; want context.Canceled, known not committed", err)
	}
	// A statement cut off by the context's end: whatever the driver
	// returns for it (the context's error, without its cause), the
	// transaction's error matches the cause, as a session's end is told
	// apart from a caller's.
	sessionEnded := errors.New("the session ended")
	cutOff, endWithCause := context.WithCancelCause(ctx)
	if err := b.Tx(cutOff, nil, func(tx *sql.Tx) error {
		endWithCause(sessionEnded)
		return row(b, "cut off")(tx)
	}); !errors.Is(err, sessionEnded) || !errors.Is(err, context.Canceled) || errors.Is(err, leases.ErrOutcomeUnknown) {
		t.Fatalf("a transaction whose statement the session's end cut off: %v; want the session's end and context.Canceled", err)
	}
	if err := b.Tx(ctx, nil, row(b, "b1")); err != nil {
		t.Fatal(err)
	}
	want := []string{Row(1, "a1"), Row(1, "a2"), Row(1, "a3"), Row(2, "b1")}
	if rows := BusinessRows(t, db, table, resource); !slices.Equal(rows, want) {
		t.Fatalf("business rows %q; want %q", rows, want)
	}
	if record, _ := Committed(t, db, table, resource); record.Epoch != 2 {
		t.Fatalf("the fence is at %+v; want epoch 2", record)
	}
}
