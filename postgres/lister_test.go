package postgres_test

import (
	"testing"

	"leases"
	"leases/postgres"
	"leases/testkit/contract"
	"leases/testkit/fencetest"
)

// The Lessor lists the live leases on the server's clock, as Holder sees
// them, in one statement (contract.Lister), and the tick it returns is
// the server's.
func TestLessorListsTheLiveLeases(t *testing.T) {
	ctx := fencetest.Context(t)
	db := database(t, 0).DB
	lessor := newStore(t, db, postgres.Options{}).Lessor()
	contract.Lister(t, ctx, lessor, func(l leases.Lease) { awaitServerClock(t, db, l.ExpiresAt) })
	before := serverClock(t, db)
	_, now, err := lessor.Live(ctx)
	if after := serverClock(t, db); err != nil || now < before || now > after {
		t.Fatalf("the listing's tick: %d, %v; want the server's, between %d and %d", now, err, before, after)
	}
}
