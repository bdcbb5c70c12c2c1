package etcdstore_test

import (
	"testing"
	"time"

	"leases/etcd"
)

// The Lessor lists the live leases under its prefix (leasestest.Listing,
// in TestContract); another prefix's leases are not this store's, and
// each expiry is a bound above etcd's: at most the TTL asked for, rounded
// up to a second, plus one.
func TestLessorListsTheLiveLeases(t *testing.T) {
	ctx := testContext(t)
	lessor := newStore(t).Lessor()
	other := etcd.New(client(t), etcd.Options{Prefix: prefix(t) + "other/", CallTimeout: callBound(t)}).Lessor()
	if _, err := other.Acquire(ctx, "e", "E", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"a", "b", "c"} {
		if _, err := lessor.Acquire(ctx, r, "A", time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	live, now, err := lessor.Live(ctx)
	if err != nil || len(live) != 3 {
		t.Fatalf("live: %+v, %v; want this store's three", live, err)
	}
	for _, l := range live {
		if left := l.ExpiresAt - now; left <= 0 || left > time.Hour.Milliseconds()+1000 {
			t.Fatalf("%+v at %d: %d ms left; want a bound of at most an hour and a second", l, now, left)
		}
	}
}
