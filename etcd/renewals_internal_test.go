package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
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

// heldKeys stands in for the store's read of holder keys: the test writes
// and deletes keys, and sees the keys of each read.
type heldKeys struct {
	mu    sync.Mutex
	kvs   map[string][]byte
	reads [][]string
	rev   int64 // the revision every read is at
}

func (k *heldKeys) read(_ context.Context, keys ...string) ([]view, int64, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.reads = append(k.reads, keys)
	views := make([]view, len(keys))
	for i, key := range keys {
		views[i] = view{key: key}
		if value, ok := k.kvs[key]; ok {
			views[i].value, views[i].rev = value, 1
		}
	}
	return views, k.rev, nil
}

// write sets key to the holder record of held on the etcd lease id.
func (k *heldKeys) write(t *testing.T, key string, held leases.Lease, id clientv3.LeaseID) {
	value, err := json.Marshal(holdRecord{Holder: held.Holder, Epoch: held.Epoch, Lease: int64(id)})
	if err != nil {
		t.Fatal(err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.kvs[key] = value
}

func (k *heldKeys) remove(key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.kvs, key)
}

// readKeys is the number of keys of each read so far.
func (k *heldKeys) readKeys() []int {
	k.mu.Lock()
	defer k.mu.Unlock()
	var n []int
	for _, keys := range k.reads {
		n = append(n, len(keys))
	}
	return n
}

// heldLessor is a lessor whose keep-alives the test answers, holding
// tenures r and s of one shared etcd lease (id 7), for an hour, whose
// holder keys are in keys.
func heldLessor(t *testing.T) (*lessor, heldKeepAlives, [2]leases.Lease, *heldKeys) {
	h := heldKeepAlives{calls: make(chan chan keepAliveAnswer)}
	keys := &heldKeys{kvs: map[string][]byte{}}
	l := &lessor{store: New(nil, Options{CallTimeout: time.Hour}), shared: map[int64]*sharedLease{},
		tenures: map[tenure]*heldTenure{}, batches: map[clientv3.LeaseID]*keepAlives{}, keepAliveOnce: h.keepAliveOnce,
		readHeld: keys.read, owners: newOwners(context.Background())}
	l.owners.barrier = func(context.Context) (int64, error) { return 0, errors.New("no cluster") }
	ready := make(chan struct{})
	close(ready)
	sl := &sharedLease{seconds: 3600, ready: ready, id: 7, ttl: 3600, users: 3} // never revoked here
	l.shared[3600] = sl
	var held [2]leases.Lease
	for i, resource := range []string{"r", "s"} {
		held[i] = leases.Lease{Resource: resource, Holder: "A", Epoch: 1, ExpiresAt: 1, Ticks: leases.LocalMillis}
		l.owners.want(l.store.key(heldKind, resource))
		l.hold(tenure{resource, "A", 1}, sl, time.Now(), time.Hour, 0)
		keys.write(t, l.store.key(heldKind, resource), held[i], 7)
	}
	t.Cleanup(func() {
		for t, h := range l.tenures {
			l.mu.Lock()
			delete(l.tenures, t)
			l.mu.Unlock()
			h.reaper.Stop()
		}
	})
	return l, h, held, keys
}

func ok(ttl int64) keepAliveAnswer {
	return keepAliveAnswer{resp: &clientv3.LeaseKeepAliveResponse{TTL: ttl}}
}

// A call that comes while a keep-alive is in flight is answered by the
// next one, sent after it came, never by the one in flight: the holder
// counts its lease from when it sent its call, and etcd from when its
// leader received the keep-alive.
func TestARenewalWaitsForTheNextKeepAlive(t *testing.T) {
	l, h, _, _ := heldLessor(t)
	first := l.join(7, nil)
	inflight := <-h.calls    // the first batch is sent and held
	second := l.join(7, nil) // a call that began while it is in flight
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
	l, h, held, _ := heldLessor(t)
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
	l, h, held, _ := heldLessor(t)
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
	l, h, _, _ := heldLessor(t)
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

// A renewal is "held" only if its key, read after its batch's keep-alive
// was answered, is still its tenure's: the shared etcd lease renews every
// key attached to it, also one whose tenure was released elsewhere while
// the keep-alive was in flight. The batch reads all of its renewals' keys
// in one request, and the renewal of a deleted key ends its tenure.
func TestABatchReadsItsKeysAfterItsKeepAlive(t *testing.T) {
	l, h, held, keys := heldLessor(t)
	first := l.join(7, nil)
	inflight := <-h.calls // the first batch is sent and held
	r, s := l.join(7, &held[0]), l.join(7, &held[1])
	inflight <- ok(3600)
	<-first
	next := <-h.calls                       // the keep-alive of r's and s's batch is in flight
	keys.remove(l.store.key(heldKind, "r")) // a release from another process, meanwhile
	if n := keys.readKeys(); len(n) != 0 {
		t.Fatalf("keys read before the batch's keep-alive was answered: %v", n)
	}
	next <- ok(3600)
	if a := <-r; a.err != nil || a.held {
		t.Fatalf("r, whose key was deleted while the keep-alive was in flight: %+v; want not held", a)
	}
	if a := <-s; a.err != nil || !a.held {
		t.Fatalf("s, whose key is its tenure's: %+v; want held", a)
	}
	if n := keys.readKeys(); !slices.Equal(n, []int{2}) {
		t.Fatalf("keys per read: %v; want one read of the batch's 2 keys", n)
	}

	renewed := make(chan error, 1)
	go func() { _, err := l.Renew(context.Background(), held[0], time.Hour); renewed <- err }()
	(<-h.calls) <- ok(3600)
	if err := <-renewed; !errors.Is(err, leases.ErrLeaseExpired) {
		t.Fatalf("renewal of r, whose key was deleted: %v; want ErrLeaseExpired", err)
	}
	l.mu.Lock()
	_, kept := l.tenures[tenure{"r", "A", 1}]
	l.mu.Unlock()
	if kept {
		t.Fatal("r's tenure kept after its renewal found its key deleted")
	}
}

// A batch of more renewals than one transaction may hold reads their keys
// in transactions of heldPerRead Gets each (etcd's --max-txn-ops), sent
// together.
func TestABatchReadsItsKeysInTransactionsOfLimitedSize(t *testing.T) {
	l, h, _, keys := heldLessor(t)
	first := l.join(7, nil)
	inflight := <-h.calls
	const n = 2*heldPerRead + 1
	var answers []<-chan keepAliveAnswer
	for i := range n {
		lease := leases.Lease{Resource: fmt.Sprint("x", i), Holder: "A", Epoch: 1}
		keys.write(t, l.store.key(heldKind, lease.Resource), lease, 7)
		answers = append(answers, l.join(7, &lease))
	}
	inflight <- ok(3600)
	<-first
	(<-h.calls) <- ok(3600)
	for i, answer := range answers {
		if a := <-answer; a.err != nil || !a.held {
			t.Fatalf("renewal %d: %+v; want held", i, a)
		}
	}
	got := keys.readKeys()
	slices.Sort(got)
	if !slices.Equal(got, []int{1, heldPerRead, heldPerRead}) {
		t.Fatalf("keys per read: %v; want %d, %d, 1", got, heldPerRead, heldPerRead)
	}
}
