package etcd_test

import (
	"errors"
	"testing"
	"time"

	"leases"
	"leases/etcd"
)

// The Lessor lists the live leases under its prefix, as Holder sees
// them: a released lease is left out, and so is one whose etcd lease
// etcd's leader ended (the watch sees the holder key go); another
// prefix's leases are not this store's. Each expiry is a bound above
// etcd's: at most the TTL asked for, rounded up to a second, plus one.
func TestLessorListsTheLiveLeases(t *testing.T) {
	ctx := testContext(t)
	store := newStore(t)
	lessor := store.Lessor()
	lister, ok := lessor.(leases.Lister)
	if !ok {
		t.Fatalf("the Lessor (%T) is not a leases.Lister", lessor)
	}
	acquire := func(resource, holder string, ttl time.Duration) leases.Lease {
		t.Helper()
		l, err := lessor.Acquire(ctx, resource, holder, ttl)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	if live, _, err := lister.Live(ctx); err != nil || len(live) != 0 {
		t.Fatalf("nothing leased: %+v, %v", live, err)
	}
	c := acquire("c/1", "C", 30*time.Second)
	a := acquire("a", "A", 20*time.Second)
	if err := lessor.Release(ctx, acquire("b", "B", 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	changed, err := lessor.(leases.Watcher).Changed(ctx, "d")
	if err != nil {
		t.Fatal(err)
	}
	acquire("d", "D", time.Millisecond) // etcd's shortest lease
	<-changed                           // granted
	if changed, err = lessor.(leases.Watcher).Changed(ctx, "d"); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := lessor.Holder(ctx, "d"); err != nil || ok {
		// Not yet ended: wait for etcd to delete the key.
		<-changed
	}
	other := etcd.New(client(t), etcd.Options{Prefix: prefix(t) + "other/"}).Lessor()
	if _, err := other.Acquire(ctx, "e", "E", 30*time.Second); err != nil {
		t.Fatal(err)
	}

	check := func(live []leases.Lease, now int64, want ...leases.Lease) {
		t.Helper()
		if len(live) != len(want) {
			t.Fatalf("live: %+v; want %+v", live, want)
		}
		for i, l := range live {
			w := want[i]
			bound := (w.ExpiresAt - w.GrantedAt + 999) / 1000 * 1000 // the TTL, rounded up to a second
			if l.Resource != w.Resource || l.Holder != w.Holder || l.Epoch != w.Epoch ||
				l.ExpiresAt <= now || l.ExpiresAt-now > bound+1000 {
				t.Fatalf("live[%d] = %+v at %d; want %s held by %s at epoch %d, expiring within %dms", i, l, now, w.Resource, w.Holder, w.Epoch, bound+1000)
			}
		}
	}
	live, now, err := lister.Live(ctx)
	if err != nil {
		t.Fatal(err)
	}
	check(live, now, a, c)
	named, now, err := lister.Live(ctx, "c/1", "b", "d", "never", "c/1", "a")
	if err != nil {
		t.Fatal(err)
	}
	check(named, now, a, c)
	if _, _, err := lister.Live(ctx, "a", ""); !errors.Is(err, leases.ErrInvalidInput) {
		t.Fatalf("an empty name among the named: %v; want ErrInvalidInput", err)
	}
}
