package etcdstore_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"leases"
	"leases/session"
)

// The Lessor's grants are etcd leases: one holder at a time, epochs that
// only grow (also after a release), renewals and releases by the holder
// only, also from another process that did not grant them.
func TestLessorGrantsRenewsAndReleases(t *testing.T) {
	ctx := testContext(t)
	store := newStore(t)
	l, other := store.Lessor(), newStore(t).Lessor()
	a, err := l.Acquire(ctx, "r", "A", time.Second)
	if err != nil || a.Epoch != 1 || a.Holder != "A" {
		t.Fatalf("first acquire: %+v, %v", a, err)
	}
	var held *leases.HeldError
	if _, err := other.Acquire(ctx, "r", "B", time.Second); !errors.As(err, &held) || held.Live.Holder != "A" || held.Live.Epoch != 1 {
		t.Fatalf("acquire of a held resource: %v; want a HeldError naming A at epoch 1", err)
	}
	if _, err := other.Renew(ctx, a, time.Second); err != nil { // another process: reads the holder key
		t.Fatalf("renew from another process: %v", err)
	}
	wrong := a
	wrong.Epoch = 7
	if _, err := other.Renew(ctx, wrong, time.Second); !errors.Is(err, leases.ErrNotHolder) {
		t.Fatalf("renew of an epoch never granted: %v; want ErrNotHolder", err)
	}
	if live, ok, err := other.Lease(ctx, "r"); err != nil || !ok || live.Holder != "A" || live.Epoch != 1 {
		t.Fatalf("holder: %+v, %v, %v", live, ok, err)
	}
	if err := l.Release(ctx, a); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := other.Lease(ctx, "r"); err != nil || ok {
		t.Fatalf("holder after the release: %v, %v", ok, err)
	}
	if err := l.Release(ctx, a); !leases.IsRefusal(err) {
		t.Fatalf("a second release: %v; want a refusal", err)
	}
	if _, err := l.Renew(ctx, a, time.Second); !errors.Is(err, leases.ErrLeaseExpired) {
		t.Fatalf("renew after the release: %v; want ErrLeaseExpired", err)
	}
	b, err := other.Acquire(ctx, "r", "B", time.Second)
	if err != nil || b.Epoch != 2 {
		t.Fatalf("acquire after the release: %+v, %v; want epoch 2", b, err)
	}
	if err := other.Release(ctx, b); err != nil {
		t.Fatal(err)
	}
	if again, err := l.Acquire(ctx, "r", "A", time.Second); err != nil || again.Epoch != 3 {
		t.Fatalf("A again: %+v, %v; want epoch 3, never 1 or 2", again, err)
	}
	if _, err := l.Acquire(ctx, "", "A", time.Second); !errors.Is(err, leases.ErrInvalidInput) {
		t.Fatalf("an empty resource: %v", err)
	}
}

// Among many acquirers at once, exactly one is granted.
func TestLessorGrantsOneAmongConcurrentAcquirers(t *testing.T) {
	ctx := testContext(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	granted, refused := 0, 0
	for range 8 {
		l := newStore(t).Lessor()
		wg.Go(func() {
			_, err := l.Acquire(ctx, "r", "X", 5*time.Second)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				granted++
			case errors.Is(err, leases.ErrLeaseHeld):
				refused++
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if granted != 1 || refused != 7 {
		t.Fatalf("%d granted, %d refused; want 1 and 7", granted, refused)
	}
}

// A lease nobody renews is ended by etcd itself, on its leader's clock:
// a session waiting for it is granted once etcd deleted the holder key,
// with the next epoch, and the old holder's renewal is refused.
func TestLessorLeaseRunsOutOnEtcdsClock(t *testing.T) {
	ctx := testContext(t)
	l := newStore(t).Lessor()
	a, err := l.Acquire(ctx, "r", "A", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	s, err := session.Wait(ctx, newStore(t).Lessor(), "r", "B",
		session.Options{TTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	if waited := time.Since(began); s.Epoch() != 2 || waited < 500*time.Millisecond {
		t.Fatalf("B granted epoch %d after %v; want epoch 2, once A's etcd lease ran out", s.Epoch(), waited)
	}
	if _, err := l.Renew(ctx, a, time.Second); !leases.IsRefusal(err) {
		t.Fatalf("A's renewal after its lease ran out: %v; want a refusal", err)
	}
}

// A session on the Lessor: another process's release wakes a waiter at
// once, through a watch of the holder key.
func TestSessionOnTheLessorLearnsOfARelease(t *testing.T) {
	ctx := testContext(t)
	opts := session.Options{TTL: 30 * time.Second}
	a, err := session.Start(ctx, newStore(t).Lessor(), "r", "A", opts)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	var b *session.Session
	other := newStore(t).Lessor()
	go func() {
		var err error
		b, err = session.Wait(ctx, other, "r", "B", opts)
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("B granted while A holds the lease: %v", err)
	default:
	}
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	if b.Epoch() != 2 {
		t.Fatalf("B at epoch %d; want 2", b.Epoch())
	}
}
