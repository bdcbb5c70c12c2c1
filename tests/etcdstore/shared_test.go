package etcdstore_test

import (
	"errors"
	"testing"
	"time"

	"leases"
	"leases/session"
)

// Tenures of one process share its etcd lease: a release deletes only
// its own key, so that the other tenure's key stays and no grant of its
// resource is possible; and a tenure whose holder stops renewing loses
// its key at its own deadline, although the other tenure's session keeps
// the shared etcd lease alive: only then is its resource granted, with
// the next epoch.
func TestTenuresOfASharedLeaseEndOneByOne(t *testing.T) {
	ctx := testContext(t)
	l, other := newStore(t).Lessor(), newStore(t).Lessor()
	kept, err := session.Start(ctx, l, "kept", "A", session.Options{TTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer kept.Close(ctx)
	released, err := l.Acquire(ctx, "released", "A", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	abandoned, err := l.Acquire(ctx, "abandoned", "A", 2*time.Second) // on the kept session's etcd lease
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx, released); err != nil {
		t.Fatal(err)
	}
	var held *leases.HeldError
	if _, err := other.Acquire(ctx, "kept", "B", time.Second); !errors.As(err, &held) || held.Live.Holder != "A" {
		t.Fatalf("a grant of a resource whose key lives on the shared etcd lease: %v; want a HeldError naming A", err)
	}
	if b, err := other.Acquire(ctx, "released", "B", time.Second); err != nil || b.Epoch != released.Epoch+1 {
		t.Fatalf("acquire of the released resource: %+v, %v; want the next epoch", b, err)
	}
	b, err := session.Wait(ctx, other, "abandoned", "B", session.Options{TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	if waited := time.Since(began); b.Epoch() != abandoned.Epoch+1 || waited < 2*time.Second {
		t.Fatalf("the abandoned resource granted at epoch %d after %v; want epoch %d, once its own two seconds had passed",
			b.Epoch(), waited, abandoned.Epoch+1)
	}
	if err := kept.Check(); err != nil {
		t.Fatalf("the kept session after the other tenures ended: %v", err)
	}
	if _, err := l.Renew(ctx, abandoned, 2*time.Second); !leases.IsRefusal(err) {
		t.Fatalf("renewal of the abandoned tenure: %v; want a refusal", err)
	}
}
