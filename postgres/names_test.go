package postgres_test

import (
	"fmt"
	"testing"
	"time"

	"leases"
	"leases/postgres"
	"leases/testkit/contract"
	"leases/testkit/fencetest"
)

// The one rule for names holds at the Lessor, its listing and its watch,
// and at the store's Tenure: each bad name is refused with
// ErrInvalidInput and no row of the store's tables, nor of the fence's,
// changes. (The authority's and the receivers' entry points: TestContract;
// the fence's: TestBadInputOnPostgreSQL.)
func TestBadNamesAreRefusedAndChangeNothing(t *testing.T) {
	ctx := fencetest.Context(t)
	db := database(t, 0)
	s := newStore(t, db.DB, postgres.Options{})
	fences := storeFence(t, db, s)
	state := func(t *testing.T) string {
		var fenceRows string
		if err := db.QueryRowContext(ctx, `SELECT coalesce(string_agg(xmin::text || ' ' || row_to_json(f)::text, E'\n'), '') FROM "`+fences.Name()+`" AS f`).Scan(&fenceRows); err != nil {
			t.Fatal(err)
		}
		return dump(t, db.DB, s) + fenceRows
	}
	t.Run("lessor", func(t *testing.T) { contract.LessorRefusesBadNames(t, s.Lessor(), state) })

	l := s.Lessor()
	held, err := l.Acquire(ctx, "guarded", "G", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var calls []contract.BadCall
	for _, name := range contract.BadNames {
		for what, lease := range map[string]leases.Lease{
			"resource": {Resource: name.Name, Holder: held.Holder, Epoch: held.Epoch},
			"holder":   {Resource: held.Resource, Holder: name.Name, Epoch: held.Epoch},
		} {
			calls = append(calls, contract.BadCall{Name: fmt.Sprintf("tenure: %s: %s", what, name.Why), Call: func() error {
				_, err := s.Tenure(ctx, lease)
				return err
			}})
		}
	}
	contract.RefuseEach(t, contract.Backend{State: state}, calls, 1000)
}
