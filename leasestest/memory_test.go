package leasestest_test

// A backend of package leases written outside it, as a fourth backend
// would be: its authority and receivers kept in maps (memstore_test.go),
// its lessor the authority on a manual clock (package leases/clock), and
// its guard a fence table (package leases/fence) in an in-memory SQLite
// database, where a service would keep its business rows. It keeps the
// contract; each of its flaws, one rule flipped, fails the clause that
// states the rule.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"

	_ "modernc.org/sqlite"

	"leases"
	"leases/clock"
	"leases/fence"
	"leases/leasestest"
	"leases/testkit/sqlitetest"
)

// TestMemoryKeepsTheContract runs the whole suite on the in-memory
// backend, as a backend's own test does.
//
// Its imports:
//
//	import (
//		"testing"
//
//		"leases/leasestest"
//	)
func TestMemoryKeepsTheContract(t *testing.T) {
	leasestest.Run(t, func(t *testing.T) leasestest.Backend {
		b, err := memoryBackend(t.Context(), flaws{}) // a fresh, empty store, closed when t ends
		if err != nil {
			t.Fatal(err)
		}
		return b
	})
}

// Each flaw fails the clause that states the rule it flips, and Check's
// error names that clause; the backend without flaws passes Check.
func TestBrokenBackendsFailTheSuite(t *testing.T) {
	ctx := t.Context()
	if err := leasestest.Check(ctx, newBackend(ctx, flaws{})); err != nil {
		t.Fatalf("the memory backend without flaws: %v", err)
	}
	for _, tc := range []struct {
		name   string
		flaws  flaws
		caught leasestest.Clause
	}{
		{"an epoch reused after a release", flaws{reuseEpochs: true}, leasestest.Release},
		{"the expiry one tick late", flaws{expiryLate: true}, leasestest.Expiry},
		{"a stale write accepted", flaws{acceptStale: true}, leasestest.FencedOutcomes},
		{"a refusal that writes", flaws{refusalWrites: true}, leasestest.Epochs},
		{"a tenure blind to newer ones", flaws{tenureApart: true}, leasestest.Tenure},
		{"a guarded write of an expired lease", flaws{guardedForgets: true}, leasestest.GuardedOutcomes},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := leasestest.Check(ctx, newBackend(ctx, tc.flaws))
			if err == nil {
				t.Fatal("the broken backend passes the suite")
			}
			said := clauseSaid(err, tc.caught)
			if said == "" {
				t.Fatalf("the suite did not name %q; it said:\n%v", tc.caught, err)
			}
			t.Logf("%s", said)
		})
	}
}

// clauseSaid is the first line of err's failure of clause c, or "".
func clauseSaid(err error, c leasestest.Clause) string {
	for _, line := range strings.Split(err.Error(), "\n") {
		if strings.HasPrefix(line, string(c)+": ") {
			return line
		}
	}
	return ""
}

// A backend that lacks what the suite requires, or a clause it does not
// know, is an error, not a pass.
func TestCheckRefusesWhatItCannotCheck(t *testing.T) {
	ctx := t.Context()
	for name, b := range map[string]leasestest.Backend{
		"no authority": {State: func(context.Context) (string, error) { return "", nil }},
		"no state":     {Authority: newMemory(flaws{})},
	} {
		if err := leasestest.Check(ctx, func() (leasestest.Backend, error) { return b, nil }); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if err := leasestest.Check(ctx, newBackend(ctx, flaws{}), "no such clause"); err == nil {
		t.Error("an unknown clause: no error")
	}
}

// newBackend makes fresh memory backends with f, for Check.
func newBackend(ctx context.Context, f flaws) func() (leasestest.Backend, error) {
	return func() (leasestest.Backend, error) { return memoryBackend(ctx, f) }
}

// memoryBackend is a fresh memory store with flaws f as the suite sees
// it: its lessor on a manual clock that Expire advances, and its guard a
// fence table in an in-memory SQLite database with a business table
// beside, which Work inserts into; the database is closed when ctx ends.
func memoryBackend(ctx context.Context, f flaws) (leasestest.Backend, error) {
	m := newMemory(f)
	db, err := sql.Open("sqlite", ":memory:?_txlock=immediate")
	if err != nil {
		return leasestest.Backend{}, err
	}
	db.SetMaxOpenConns(1) // one connection: one in-memory database
	context.AfterFunc(ctx, func() { _ = db.Close() })
	fences, err := fence.New(db, fence.Options{})
	if err == nil {
		err = fences.Create(ctx)
	}
	if err == nil {
		_, err = db.ExecContext(ctx, `CREATE TABLE work (resource TEXT, epoch INTEGER)`)
	}
	if err != nil {
		return leasestest.Backend{}, errors.Join(err, db.Close())
	}
	var guard fence.Guard = fences
	if f.tenureApart {
		guard = &tablePerTenure{db: db}
	}
	host := clock.NewManual(0)
	return leasestest.Backend{
		Authority: m,
		State: func(ctx context.Context) (string, error) {
			rows, err := sqlitetest.Rows(ctx, db)
			return m.state() + rows, err
		},
		Fenced:   receiver{m, leases.Fenced},
		Unfenced: receiver{m, leases.Unfenced},
		Guarded:  guardedReceiver{m},
		Lessor:   clock.Lessor(m, host),
		Expire:   func(ctx context.Context, l leases.Lease) error { return host.Advance(max(host.Now(), l.ExpiresAt)) },
		Guard:    guard,
		Work: func(ctx context.Context, tx *sql.Tx, l leases.Lease) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO work VALUES (?, ?)`, l.Resource, l.Epoch)
			return err
		},
	}, nil
}

// tablePerTenure is the flaw tenureApart: a guard that begins each tenure
// on a fence table of its own, so that no tenure sees a newer one.
type tablePerTenure struct {
	db *sql.DB
	n  int
}

func (g *tablePerTenure) Tenure(ctx context.Context, l leases.Lease) (*fence.Tenure, error) {
	g.n++
	table, err := fence.New(g.db, fence.Options{Table: fmt.Sprintf("fence_%d", g.n)})
	if err != nil {
		return nil, err
	}
	if err := table.Create(ctx); err != nil {
		return nil, err
	}
	return table.Tenure(ctx, l)
}
