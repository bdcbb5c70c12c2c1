package postgres_test

import (
	"database/sql"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"leases"
	"leases/postgres"
	"leases/testkit/contract"
	"leases/testkit/fencetest"
)

// The contract, on the shared server, each clause on tables of its own.
func TestContract(t *testing.T) {
	contract.Run(t, func(t *testing.T) contract.Backend {
		db := database(t, 0).DB
		s := newStore(t, db, postgres.Options{})
		return contract.Backend{
			Authority: s.Authority(),
			Fenced:    s.Receiver(leases.Fenced),
			Unfenced:  s.Receiver(leases.Unfenced),
			Guarded:   s.Guarded(),
			Receiver:  s.Receiver,
			State:     func(t *testing.T) string { return dump(t, db, s) },
		}
	})
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
	var out strings.Builder
	for _, table := range s.Tables() {
		rows, err := db.QueryContext(fencetest.Context(t),
			`SELECT xmin::text, row_to_json(t)::text FROM "`+table+`" AS t ORDER BY resource`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var xmin, row string
			if err := rows.Scan(&xmin, &row); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&out, "%s @%s %s\n", table, xmin, row)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
	}
	return out.String()
}
