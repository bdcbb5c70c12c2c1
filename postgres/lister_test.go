package postgres_test

import (
	"testing"
	"time"

	"leases/postgres"
	"leases/testkit/fencetest"
)

// The Lessor's listing (leasestest.Listing, in TestContract) is read at
// the server's tick, and says so.
func TestLessorListsTheLiveLeases(t *testing.T) {
	ctx := fencetest.Context(t)
	db := database(t, 0).DB
	lessor := newStore(t, db, postgres.Options{}).Lessor()
	if _, err := lessor.Acquire(ctx, "r", "A", time.Hour); err != nil {
		t.Fatal(err)
	}
	before := serverClock(t, db)
	live, now, err := lessor.Live(ctx)
	if after := serverClock(t, db); err != nil || now < before || now > after || len(live) != 1 {
		t.Fatalf("the listing: %+v at tick %d, %v; want A's lease, at the server's tick, between %d and %d", live, now, err, before, after)
	}
}
