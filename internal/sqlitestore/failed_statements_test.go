package sqlitestore

// A statement that fails inside an operation makes the operation fail: it
// is never taken for "no row" (which would grant epoch 1 again or accept a
// stale write), nor for a refusal, and the store keeps what it held. The
// statements are swapped for ones that fail in the same place (a row that
// does not scan, an insert its table's CHECK refuses), in this process,
// without a fault injector; the root module's TestFailedReadIsNotNotFound
// does the same with a real read(2) error.

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"leases"
)

// The failing stand-ins: each returns a row whose first column is text
// where an integer is scanned, or stores an epoch the CHECK refuses.
const (
	unscannableLease   = `SELECT 'x', holder, granted_at, expires_at, last_tick FROM authority_leases WHERE resource = ?`
	unscannableRecord  = `SELECT 'x', value_epoch, value FROM receiver_records WHERE resource = ?`
	unscannableGuarded = `SELECT 'x', value_epoch, value FROM guarded_records WHERE resource = ?`
	refusedLeasePut    = `INSERT INTO authority_leases (resource, epoch, holder, granted_at, expires_at, last_tick)
		VALUES (?, -?, ?, ?, ?, ?)`
	// The tables' CHECK (epoch >= 1) refuses these writes.
	refusedRecordWrite   = `INSERT INTO receiver_records (resource, epoch, value_epoch, value) VALUES (?, -?, ?, ?)`
	refusedRecordObserve = `INSERT INTO receiver_records (resource, epoch) VALUES (?, -?)`
	refusedUnfencedWrite = `INSERT INTO unfenced_records (resource, epoch, value) VALUES (?, -?, ?)`
)

func TestFailedStatementFailsTheOperation(t *testing.T) {
	ctx := context.Background()
	refusals := []error{leases.ErrInvalidInput, leases.ErrLeaseHeld, leases.ErrNotHolder, leases.ErrLeaseExpired, leases.ErrTickBackwards}
	cases := []struct {
		name      string
		statement string // the statement swapped
		with      string // for this one
		op        func(s *Store, a leases.Lease) error
	}{
		{"acquire whose read fails", sqlReadLease, unscannableLease, func(s *Store, _ leases.Lease) error {
			_, err := s.Authority().Acquire(ctx, "r", "B", 20, 1)
			return err
		}},
		{"acquire whose write fails", sqlPutLease, refusedLeasePut, func(s *Store, _ leases.Lease) error {
			_, err := s.Authority().Acquire(ctx, "fresh", "B", 20, 1)
			return err
		}},
		{"renew whose read fails", sqlReadLease, unscannableLease, func(s *Store, a leases.Lease) error {
			_, err := s.Authority().Renew(ctx, a, 6, 3)
			return err
		}},
		{"release whose read fails", sqlReadLease, unscannableLease, func(s *Store, a leases.Lease) error {
			return s.Authority().Release(ctx, a, 6)
		}},
		{"holder whose read fails", sqlReadLease, unscannableLease, func(s *Store, _ leases.Lease) error {
			_, _, err := s.Authority().Lease(ctx, "r", 6)
			return err
		}},
		{"stale write whose read fails", sqlReadRecord, unscannableRecord, func(s *Store, _ leases.Lease) error {
			_, err := s.Receiver(leases.Fenced).Write(ctx, "r", 1, "stale")
			return err
		}},
		{"stale observe whose read fails", sqlReadRecord, unscannableRecord, func(s *Store, _ leases.Lease) error {
			_, err := s.Receiver(leases.Fenced).Fence(ctx, "r", 1)
			return err
		}},
		{"accepted write whose write fails", sqlWriteRecord, refusedRecordWrite, func(s *Store, _ leases.Lease) error {
			_, err := s.Receiver(leases.Fenced).Write(ctx, "r", 3, "v3")
			return err
		}},
		{"accepted observe whose write fails", sqlObserveRecord, refusedRecordObserve, func(s *Store, _ leases.Lease) error {
			_, err := s.Receiver(leases.Fenced).Fence(ctx, "r", 3)
			return err
		}},
		{"unfenced write whose write fails", sqlWriteUnfenced, refusedUnfencedWrite, func(s *Store, _ leases.Lease) error {
			_, err := s.Receiver(leases.Unfenced).Write(ctx, "r", 3, "v3")
			return err
		}},
		{"guarded write whose lease read fails", sqlReadLease, unscannableLease, func(s *Store, a leases.Lease) error {
			_, err := s.Guarded().Write(ctx, a, 6, "v2")
			return err
		}},
		{"guarded read whose read fails", sqlReadGuarded, unscannableGuarded, func(s *Store, _ leases.Lease) error {
			_, _, err := s.Guarded().Read(ctx, "r")
			return err
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, a := storeWorthProtecting(t)
			before := dump(t, s)
			swap(t, s, tc.statement, tc.with)
			err := tc.op(s, a)
			if err == nil {
				t.Fatal("the operation succeeded")
			}
			for _, refusal := range refusals {
				if errors.Is(err, refusal) {
					t.Fatalf("%v: a failure reported as the refusal %v", err, refusal)
				}
			}
			if after := dump(t, s); after != before {
				t.Fatalf("the store changed:\n%s\nbecame\n%s", before, after)
			}
		})
	}
}

// storeWorthProtecting is a store with A's live lease on "r" at epoch 2
// (ticks 5 to 15) and A's value in the fenced and the guarded receiver.
func storeWorthProtecting(t *testing.T) (*Store, leases.Lease) {
	t.Helper()
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "store.db"), Config{BusyTimeout: DefaultBusyTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	old, err := s.Authority().Acquire(ctx, "r", "A", 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Authority().Release(ctx, old, 1); err != nil {
		t.Fatal(err)
	}
	a, err := s.Authority().Acquire(ctx, "r", "A", 5, 10)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Receiver(leases.Fenced).Write(ctx, "r", a.Epoch, "v"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Guarded().Write(ctx, a, 5, "v"); err != nil {
		t.Fatal(err)
	}
	return s, a
}

// swap makes s run with in place of the prepared statement text until the
// test ends.
func swap(t *testing.T, s *Store, text, with string) {
	t.Helper()
	stmt, err := s.db.PrepareContext(context.Background(), with)
	if err != nil {
		t.Fatal(err)
	}
	original := s.sql.byText[text]
	s.sql.byText[text] = stmt
	t.Cleanup(func() {
		s.sql.byText[text] = original
		_ = stmt.Close()
	})
}

// dump is every row of the store's tables, read without the prepared
// statements (some of which a test has swapped).
func dump(t *testing.T, s *Store) string {
	t.Helper()
	var out string
	for _, table := range []string{"authority_leases", "receiver_records", "unfenced_records", "guarded_records"} {
		rows, err := s.db.Query(`SELECT * FROM ` + table + ` ORDER BY 1`)
		if err != nil {
			t.Fatal(err)
		}
		cols, err := rows.Columns()
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			values := make([]any, len(cols))
			pointers := make([]any, len(cols))
			for i := range values {
				pointers[i] = &values[i]
			}
			if err := rows.Scan(pointers...); err != nil {
				t.Fatal(err)
			}
			for i, v := range values {
				if b, ok := v.([]byte); ok {
					values[i] = string(b)
				}
			}
			out += fmt.Sprintln(table, values)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			t.Fatal(err)
		}
	}
	return out
}
