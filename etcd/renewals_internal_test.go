package etcd

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"leases"
)

// heldKeepAlives stands in for the client's keep-alive so that a test
// holds each batch in flight: every keep-alive sent shows on calls, and
// waits there for the answer the test gives. The lessor's batching, not
// etcd, is under test; tests/etcdstore runs it on a cluster.
type heldKeepAlives struct{ calls chan chan keepAliveAnswer }

func (h heldKeepAlives) keepAliveOnce(ctx context.Context, _ clientv3.LeaseID) (*clientv3.LeaseKeepAliveResponse, error) {
	answer := make(chan keepAliveAnswer)
	select {
	case h.calls <- answer:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	a := <-answer
	return a.resp, a.err
}

// heldLessor is a lessor whose keep-alives the test answers, holding
// tenures r and s of one shared etcd lease (id 7), for an hour.
func heldLessor(t *testing.T) (*lessor, heldKeepAlives, [2]leases.Lease) {
	h := heldKeepAlives{calls: make(chan chan keepAliveAnswer)}
	l := &lessor{store: New(nil, Options{CallTimeout: time.Hour}), shared: map[int64]*sharedLease{},
		tenures: map[tenure]*heldTenure{}, batches: map[clientv3.LeaseID]*batch{}, keepAliveOnce: h.keepAliveOnce,
		stillHeld: func(context.Context, leases.Lease, clientv3.LeaseID) (bool, error) { return true, nil }}
	ready := make(chan struct{})
	close(ready)
	sl := &sharedLease{seconds: 3600, ready: ready, id: 7, ttl: 3600, users: 3} // never revoked here
	l.shared[3600] = sl
	var held [2]leases.Lease
	for i, resource := range []string{"r", "s"} {
		held[i] = leases.Lease{Resource: resource, Holder: "A", Epoch: 1, ExpiresAt: 1, Ticks: leases.LocalMillis}
		l.hold(tenure{resource, "A", 1}, sl, time.Now(), time.Hour)
	}
	t.Cleanup(func() {
		for t, h := range l.tenures {
			l.mu.Lock()
			delete(l.tenures, t)
			l.mu.Unlock()
			h.reaper.Stop()
		}
	})
	return l, h, held
}

func ok(ttl int64) keepAliveAnswer {
	return keepAliveAnswer{resp: &clientv3.LeaseKeepAliveResponse{TTL: ttl}}
}

// A call that comes while a keep-alive is in flight is answered by the
// next one, sent after it came, never by the one in flight: the holder
// counts its lease from when it sent its call, and etcd from when its
// leader received the keep-alive.
func TestARenewalWaitsForTheNextKeepAlive(t *testing.T) {
	l, h, _ := heldLessor(t)
	first := l.join(7)
	inflight := <-h.calls // the first batch is sent and held
	second := l.join(7)   // a call that began while it is in flight
	inflight <- ok(1)
	if a := <-first; a.err != nil || a.resp.TTL != 1 {
		t.Fatalf("the first call: %+v; want the answer of its batch", a)
	}
	var next chan keepAliveAnswer
	select {
	case a := <-second:
		t.Fatalf("a call answered by the keep-alive sent before it began (TTL %d)", a.resp.TTL)
	case next = <-h.calls:
	}
	select {
	case a := <-second:
		t.Fatalf("a call answered by the keep-alive sent before it began (TTL %d)", a.resp.TTL)
	default:
	}
	next <- ok(2)
	if a := <-second; a.err != nil || a.resp.TTL != 2 {
		t.Fatalf("the second call: %+v; want the answer of the next batch", a)
	}
}

// A tenure released while its renewal is in flight is refused, and the
// refusal is its own: the other tenure of the same etcd lease, renewed in
// the next batch, is renewed.
func TestARefusalInABatchIsOneTenuresOwn(t *testing.T) {
	l, h, held := heldLessor(t)
	ctx := context.Background()
	renewed := make(chan error, 2)
	go func() { _, err := l.Renew(ctx, held[0], time.Hour); renewed <- err }()
	inflight := <-h.calls
	l.mu.Lock()
	own := l.tenures[tenure{"r", "A", 1}]
	l.mu.Unlock()
	l.drop(tenure{"r", "A", 1}, own) // released meanwhile
	go func() { _, err := l.Renew(ctx, held[1], time.Hour); renewed <- err }()
	inflight <- ok(3600)
	if err := <-renewed; !errors.Is(err, leases.ErrLeaseExpired) {
		t.Fatalf("renewal of the released tenure: %v; want ErrLeaseExpired", err)
	}
	(<-h.calls) <- ok(3600)
	if err := <-renewed; err != nil {
		t.Fatalf("renewal of the other tenure: %v; want it renewed", err)
	}
}

// A keep-alive whose answer never came is an unknown outcome for every
// call that was waiting for it: the lease may have been extended, or not.
func TestAnUnknownKeepAliveIsUnknownForEachRenewal(t *testing.T) {
	l, h, held := heldLessor(t)
	ctx := context.Background()
	renewed := make(chan error, 2)
	for _, lease := range held {
		go func() { _, err := l.Renew(ctx, lease, time.Hour); renewed <- err }()
	}
	lost := keepAliveAnswer{err: errors.New("connection reset by peer")}
	for done := 0; done < 2; {
		select {
		case call := <-h.calls:
			call <- lost
		case err := <-renewed:
			if !errors.Is(err, leases.ErrOutcomeUnknown) {
				t.Fatalf("renewal after a keep-alive without an answer: %v; want ErrOutcomeUnknown", err)
			}
			done++
		}
	}
}

// A grant on a shared etcd lease that was granted before the grant began
// first keeps it alive, in a keep-alive sent after the grant began: the
// lease may have little of its time-to-live left, and the new key must
// live a whole TTL from when its holder sent its request.
func TestAGrantKeepsTheSharedLeaseAliveFirst(t *testing.T) {
	l, h, _ := heldLessor(t)
	type used struct {
		sl  *sharedLease
		err error
	}
	got := make(chan used, 1)
	go func() {
		sl, _, err := l.use(context.Background(), time.Hour)
		got <- used{sl, err}
	}()
	select {
	case u := <-got:
		t.Fatalf("the shared lease was used (%v) without a keep-alive sent after the grant began", u.err)
	case call := <-h.calls:
		call <- ok(3600)
	}
	if u := <-got; u.err != nil || u.sl.id != 7 {
		t.Fatalf("use: %+v; want the shared lease 7", u)
	}
}
