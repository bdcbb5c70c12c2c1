package etcd

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"leases"
)

// heldWatch stands in for the Lessor's watch, so that a test delivers
// its events and answers its progress requests: the lessor's use of the
// watch, not etcd, is under test; tests/etcdstore runs it on a cluster.
type heldWatch struct {
	mu       sync.Mutex
	events   chan clientv3.WatchResponse // the last watch's
	progress chan struct{}               // one per progress request
	barrier  atomic.Int64                // the revision each barrier read answers
}

// watchedLessor is heldLessor with n more tenures x0, x1, ... on the
// shared etcd lease 7, granted after its watch started from revision 11:
// a batch of all of them is one the watch answers.
func watchedLessor(t *testing.T, n int) (*lessor, heldKeepAlives, []leases.Lease, *heldKeys, *heldWatch) {
	l, h, _, keys := heldLessor(t)
	w := &heldWatch{progress: make(chan struct{}, 16)}
	l.owners.barrier = func(context.Context) (int64, error) { return w.barrier.Load(), nil }
	l.owners.watch = func(context.Context, int64) clientv3.WatchChan {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.events = make(chan clientv3.WatchResponse, 16)
		return w.events
	}
	l.owners.progress = func(context.Context) error { w.progress <- struct{}{}; return nil }
	w.barrier.Store(10)
	l.owners.mu.Lock()
	begun := l.owners.advanced
	l.owners.mu.Unlock()
	l.owners.start(context.Background())
	<-begun
	if !l.owners.on() {
		t.Fatal("the watch did not start")
	}
	sl := l.shared[3600]
	var held []leases.Lease
	for i := range n {
		lease := leases.Lease{Resource: fmt.Sprint("x", i), Holder: "A", Epoch: 1, ExpiresAt: 1, Ticks: leases.LocalMillis}
		key := l.store.key(heldKind, lease.Resource)
		l.owners.want(key)
		l.hold(tenure{lease.Resource, "A", 1}, sl, time.Now(), time.Hour, 11)
		keys.write(t, key, lease, 7)
		held = append(held, lease)
	}
	return l, h, held, keys, w
}

// progressed is a progress notification of revision rev.
func progressed(rev int64) clientv3.WatchResponse {
	return clientv3.WatchResponse{Header: &etcdserverpb.ResponseHeader{Revision: rev}}
}

// event is a watch response of one event on key at revision rev: a put of
// the record of held on the etcd lease 7, or a delete when held is nil.
func event(t *testing.T, key string, rev int64, held *leases.Lease) clientv3.WatchResponse {
	ev := &clientv3.Event{Type: clientv3.EventTypeDelete, Kv: &mvccpb.KeyValue{Key: []byte(key), ModRevision: rev}}
	if held != nil {
		value, err := json.Marshal(holdRecord{Holder: held.Holder, Epoch: held.Epoch, Lease: 7})
		if err != nil {
			t.Fatal(err)
		}
		ev.Type, ev.Kv.Value, ev.Kv.CreateRevision = clientv3.EventTypePut, value, rev
	}
	return clientv3.WatchResponse{Header: &etcdserverpb.ResponseHeader{Revision: rev}, Events: []*clientv3.Event{ev}}
}

// renewAll joins a renewal of each of held to one batch, held behind
// a keep-alive in flight, and returns their answers and the batch's
// keep-alive, in flight.
func renewAll(t *testing.T, l *lessor, h heldKeepAlives, held []leases.Lease) ([]<-chan keepAliveAnswer, chan keepAliveAnswer) {
	t.Helper()
	first := l.join(7, nil)
	inflight := <-h.calls
	var answers []<-chan keepAliveAnswer
	for i := range held {
		answers = append(answers, l.join(7, &held[i]))
	}
	inflight <- ok(3600)
	<-first
	return answers, <-h.calls
}

// A large batch is answered by the watch, without reading its keys: a
// renewal whose key an event deleted, or put with another tenure's record
// (a grant of a later epoch, here or elsewhere), after the keep-alive was
// sent, is not held; a put of the tenure's own record leaves it held; the
// others are held. The batch waits for the watch to cover the revision
// of its barrier read, asking for progress.
func TestALargeBatchIsAnsweredByTheWatch(t *testing.T) {
	later := leases.Lease{Holder: "A", Epoch: 2}
	same := leases.Lease{Holder: "A", Epoch: 1}
	for _, tc := range []struct {
		name string
		put  *leases.Lease // nil: a delete
		held bool
	}{
		{"deleted", nil, false},
		{"granted again at a later epoch", &later, false},
		{"put with its own record", &same, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, h, held, keys, w := watchedLessor(t, watchedAbove+1)
			answers, next := renewAll(t, l, h, held)
			w.events <- event(t, l.store.key(heldKind, "x7"), 12, tc.put) // another process's write, meanwhile
			w.barrier.Store(13)
			next <- ok(3600)
			awaitProgressRequest(t, w, answers[0])
			select {
			case a := <-answers[0]:
				t.Fatalf("a renewal answered (%+v) before the watch covered the barrier's revision", a)
			default:
			}
			w.events <- progressed(13)
			for i, answer := range answers {
				a := <-answer
				if want := i != 7 || tc.held; a.err != nil || a.held != want {
					t.Fatalf("renewal of x%d: %+v; want held %v", i, a, want)
				}
			}
			if n := keys.readKeys(); len(n) != 0 {
				t.Fatalf("keys read by a batch the watch answered: %v", n)
			}
		})
	}
}

// A progress notification below the barrier's revision (the watch's
// member lags behind the one that served the read) does not answer the
// batch: it asks again.
func TestALaggingProgressNotificationIsNotEnough(t *testing.T) {
	l, h, held, keys, w := watchedLessor(t, watchedAbove+1)
	answers, next := renewAll(t, l, h, held)
	w.barrier.Store(20)
	next <- ok(3600)
	awaitProgressRequest(t, w, answers[0])
	w.events <- progressed(15)
	awaitProgressRequest(t, w, answers[0]) // asked again
	w.events <- event(t, l.store.key(heldKind, "x3"), 18, nil)
	w.events <- progressed(20)
	for i, answer := range answers {
		if a := <-answer; a.err != nil || a.held != (i != 3) {
			t.Fatalf("renewal of x%d: %+v; want held %v", i, a, i != 3)
		}
	}
	if n := keys.readKeys(); len(n) != 0 {
		t.Fatalf("keys read by a batch the watch answered: %v", n)
	}
}

// awaitProgressRequest waits for the batch to ask for progress; a
// renewal answered first fails the test (rather than leave it waiting for
// a request that never comes).
func awaitProgressRequest(t *testing.T, w *heldWatch, answer <-chan keepAliveAnswer) {
	t.Helper()
	select {
	case <-w.progress:
	case a := <-answer:
		t.Fatalf("a renewal answered (%+v) before the watch covered the barrier's revision", a)
	}
}

// With no watch (not started yet, or broken), or for a tenure whose key
// the watch does not know (known only before the watch started), the
// batch reads the keys, in transactions of heldPerRead Gets; and a
// batch that finds the watch off starts it, so that the next one need
// not read.
func TestWithoutTheWatchABatchReadsItsKeys(t *testing.T) {
	t.Run("broken", func(t *testing.T) {
		l, h, held, keys, w := watchedLessor(t, watchedAbove+1)
		l.owners.mu.Lock()
		ended := l.owners.advanced
		l.owners.mu.Unlock()
		close(w.events) // the watch broke: canceled, compacted, no leader
		<-ended
		l.owners.mu.Lock()
		begun := l.owners.advanced
		l.owners.mu.Unlock()
		keys.remove(l.store.key(heldKind, "x5"))
		w.barrier.Store(30)
		answers, next := renewAll(t, l, h, held)
		next <- ok(3600)
		for i, answer := range answers {
			if a := <-answer; a.err != nil || a.held != (i != 5) {
				t.Fatalf("renewal of x%d: %+v; want held %v", i, a, i != 5)
			}
		}
		got := keys.readKeys()
		slices.Sort(got)
		if want := []int{watchedAbove + 1 - 2*heldPerRead, heldPerRead, heldPerRead}; !slices.Equal(got, want) {
			t.Fatalf("keys per read: %v; want %v", got, want)
		}
		<-begun
		if !l.owners.on() {
			t.Fatal("the batch did not start the watch again")
		}
	})
	t.Run("known before the watch started", func(t *testing.T) {
		l, h, held, keys, w := watchedLessor(t, watchedAbove+1)
		l.mu.Lock()
		l.tenures[tenure{"x9", "A", 1}].known = 5 // granted before the watch's revision 10
		l.mu.Unlock()
		keys.remove(l.store.key(heldKind, "x9"))
		keys.rev = 13
		answers, next := renewAll(t, l, h, held)
		w.barrier.Store(13)
		next <- ok(3600)
		<-w.progress
		w.events <- progressed(13)
		for i, answer := range answers {
			if a := <-answer; a.err != nil || a.held != (i != 9) {
				t.Fatalf("renewal of x%d: %+v; want held %v", i, a, i != 9)
			}
		}
		if n := keys.readKeys(); !slices.Equal(n, []int{1}) {
			t.Fatalf("keys per read: %v; want one read of x9's key", n)
		}
	})
}
