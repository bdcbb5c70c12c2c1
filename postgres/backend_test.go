package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"leases"
	"leases/leasestest"
	"leases/postgres"
	"leases/testkit/fencetest"
)

// The contract's public suite, every clause, on the shared server, each
// clause on tables of its own: the authority and the receivers, the
// Lessor on the server's clock, and the store's Tenure as the guard,
// which checks the lease on that clock, with business rows of a table
// beside.
func TestContract(t *testing.T) {
	leasestest.Run(t, func(t *testing.T) leasestest.Backend {
		db := database(t, 0).DB
		s := newStore(t, db, postgres.Options{})
		work := strings.TrimSuffix(s.Tables()[0], "authority") + "work"
		if _, err := db.ExecContext(fencetest.Context(t), `CREATE TABLE "`+work+`" (resource TEXT, epoch BIGINT)`); err != nil {
			t.Fatal(err)
		}
		return leasestest.Backend{
			Authority: s.Authority(),
			State: func(ctx context.Context) (string, error) {
				return dumpTables(ctx, db, append(s.Tables(), s.TenureFence().Name(), work)...)
			},
			Fenced:   s.Receiver(leases.Fenced),
			Unfenced: s.Receiver(leases.Unfenced),
			Guarded:  s.Guarded(),
			Lessor:   s.Lessor(),
			Expire: func(ctx context.Context, l leases.Lease) error {
				awaitServerClock(t, db, l.ExpiresAt)
				return nil
			},
			Guard:           s,
			GuardChecksLive: true,
			Work: func(ctx context.Context, tx *sql.Tx, l leases.Lease) error {
				_, err := tx.ExecContext(ctx, `INSERT INTO "`+work+`" VALUES ($1, $2)`, l.Resource, l.Epoch)
				return err
			},
		}
	})
}

// A receiver of a mode that is neither fenced nor unfenced refuses every
// write as invalid input.
func TestReceiverOfAnUnknownMode(t *testing.T) {
	s := newStore(t, database(t, 0).DB, postgres.Options{})
	if _, err := s.Receiver("half-fenced").Write(fencetest.Context(t), "r", 2, "x"); !errors.Is(err, leases.ErrInvalidInput) {
		t.Fatalf("a write to a receiver of an unknown mode: %v; want ErrInvalidInput", err)
	}
}

// stores counts the stores the tests made, so that each gets tables of
// its own.
var stores atomic.Int64

// newStore is a store on db with tables of its own (opts.Prefix is
// replaced), created.
func newStore(t testing.TB, db *sql.DB, opts postgres.Options) *postgres.Store {
	t.Helper()
	opts.Prefix = fmt.Sprintf("t%d_", stores.Add(1))
	s, err := postgres.New(db, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Create(fencetest.Context(t)); err != nil {
		t.Fatal(err)
	}
	return s
}

// sameStore is another handle on s's tables, through db, as another
// process has.
func sameStore(t testing.TB, s *postgres.Store, db *sql.DB, opts postgres.Options) *postgres.Store {
	t.Helper()
	opts.Prefix = strings.TrimSuffix(s.Tables()[0], "authority")
	other, err := postgres.New(db, opts)
	if err != nil {
		t.Fatal(err)
	}
	return other
}

// dump renders every row of the store's tables with the transaction that
// wrote it (xmin): a rewrite of an unchanged value shows too.
func dump(t testing.TB, db *sql.DB, s *postgres.Store) string {
	t.Helper()
	out, err := dumpTables(fencetest.Context(t), db, s.Tables()...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// dumpTables is dump's rendering of tables, or why it failed.
func dumpTables(ctx context.Context, db *sql.DB, tables ...string) (string, error) {
	var out strings.Builder
	for _, table := range tables {
		rows, err := db.QueryContext(ctx,
			`SELECT xmin::text, row_to_json(t)::text FROM "`+table+`" AS t ORDER BY resource, xmin::text`)
		if err != nil {
			return "", fmt.Errorf("dump %s: %w", table, err)
		}
		for rows.Next() {
			var xmin, row string
			if err = rows.Scan(&xmin, &row); err != nil {
				break
			}
			fmt.Fprintf(&out, "%s @%s %s\n", table, xmin, row)
		}
		if err := errors.Join(err, rows.Err(), rows.Close()); err != nil {
			return "", fmt.Errorf("dump %s: %w", table, err)
		}
	}
	return out.String(), nil
}
