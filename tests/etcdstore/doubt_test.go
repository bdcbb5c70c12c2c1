package etcdstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"

	"leases"
	"leases/clock"
	"leases/etcd"
	"leases/session"
)

// A release after an acquire whose outcome was unknown is final on etcd:
// when the session says the lease it may have granted is released, the
// acquire's transaction, if it reaches etcd only afterwards, takes no
// effect. The Lessor revokes the etcd lease the grant's key would be
// attached to; the Authority's refused release writes the row again as it
// stands, which the late transaction's compare no longer matches. Without
// either, the late grant would be live under the holder's name while the
// holder was told that nothing is held.
func TestAReleaseAfterAnUnknownAcquireIsFinal(t *testing.T) {
	for _, side := range []struct {
		name   string
		lessor func(s *etcd.Store) leases.Lessor
	}{
		{"Lessor", func(s *etcd.Store) leases.Lessor { return s.Lessor() }},
		{"Authority", func(s *etcd.Store) leases.Lessor { return clock.Lessor(s.Authority(), clock.Wall{}) }},
	} {
		t.Run(side.name, func(t *testing.T) {
			ctx := testContext(t)
			c := client(t)
			kv := &hookedKV{KV: c.KV}
			c.KV = kv
			// The acquire's transaction is not sent: it is kept, and its
			// call fails as if the connection had dropped with the
			// request on its way (an unknown outcome). The test sends it
			// later, as a member paused with the request queued does when
			// it continues.
			held := make(chan clientv3.Txn, 1)
			hold := func(txn *hookedTxn) (*clientv3.TxnResponse, error) {
				held <- txn.again(context.WithoutCancel(txn.ctx))
				return nil, errors.New("connection lost with the request on its way")
			}
			store := etcd.New(c, options(t))
			lessor := side.lessor(store)
			// A tenure of the same TTL held throughout: on the Lessor it
			// keeps the shared etcd lease alive, which a late grant's key
			// would be attached to.
			if _, err := lessor.Acquire(ctx, "kept", "A", time.Minute); err != nil {
				t.Fatal(err)
			}
			for _, resource := range []string{"fresh", "used"} {
				if resource == "used" { // a row that exists: epoch 1 granted and released
					first, err := lessor.Acquire(ctx, resource, "A", time.Minute)
					if err == nil {
						err = lessor.Release(ctx, first)
					}
					if err != nil {
						t.Fatal(err)
					}
				}
				kv.onCommit(hold)
				_, err := session.Start(ctx, lessor, resource, "A", session.Options{TTL: time.Minute})
				var unknown *session.OutcomeError
				if !errors.As(err, &unknown) || !unknown.Released {
					t.Fatalf("%s: Start: %v; want an *OutcomeError, released", resource, err)
				}
				late := <-held
				if resp, err := late.Commit(); err == nil && resp.Succeeded {
					t.Errorf("%s: the late grant's transaction took effect after the release", resource)
				}
				// Another store's look, on what etcd holds.
				if live, ok, err := side.lessor(newStore(t)).Lease(ctx, resource); err != nil || ok {
					t.Fatalf("%s: after the late grant's transaction, the holder is %+v (live %v, %v); Start said nothing is held",
						resource, live, ok, err)
				}
			}
		})
	}
}

// txnSent is a gRPC stats handler that closes sent once the payload of
// the next transaction asked for has gone out on the connection.
type txnSent struct {
	mu   sync.Mutex
	sent chan struct{}
}

// txnKey marks the context of a transaction's call.
type txnKey struct{}

func (h *txnSent) expect() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sent = make(chan struct{})
	return h.sent
}

func (h *txnSent) TagRPC(ctx context.Context, info *stats.RPCTagInfo) context.Context {
	if info.FullMethodName == "/etcdserverpb.KV/Txn" {
		return context.WithValue(ctx, txnKey{}, true)
	}
	return ctx
}

func (h *txnSent) HandleRPC(ctx context.Context, s stats.RPCStats) {
	if _, ok := s.(*stats.OutPayload); !ok || ctx.Value(txnKey{}) == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.sent != nil {
		close(h.sent)
		h.sent = nil
	}
}

func (h *txnSent) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (h *txnSent) HandleConn(context.Context, stats.ConnStats)                       {}

// Issue 20: Wait's context ends while its grant's transaction is on its
// way to a member that was paused the moment before (SIGSTOP; the request
// is in its socket, and the member may propose it when it continues). Wait
// returns an *OutcomeError, never a plain context error, and the lease is
// released or said to be possibly held: while the member stays paused the
// release, through it, cannot succeed within Options.CloseTimeout, and the
// error names the lease and until when it may be live; when the member
// continues as the release begins, the release goes through.
func TestWaitWhoseGrantIsOnItsWayToAPausedMember(t *testing.T) {
	for _, continues := range []bool{false, true} {
		name := map[bool]string{false: "the member stays paused", true: "the member continues as the release begins"}[continues]
		t.Run(name, func(t *testing.T) {
			ctx, cluster := testContext(t), ownCluster(t)
			leader, err := cluster.Leader(ctx)
			if err != nil {
				t.Fatal(err)
			}
			member := (leader + 1) % cluster.Members() // a follower: the others elect nothing meanwhile
			sent := &txnSent{}
			c, err := clientv3.New(clientv3.Config{Endpoints: cluster.Endpoints()[member : member+1], Logger: zap.NewNop(),
				DialOptions: []grpc.DialOption{grpc.WithStatsHandler(sent)}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			kv := &hookedKV{KV: c.KV}
			c.KV = kv
			lessor := &releaseHook{Lessor: etcd.New(c, etcd.Options{CallTimeout: callBound(t)}).Lessor()}
			paused := false
			t.Cleanup(func() {
				if paused {
					_ = cluster.Continue(member)
				}
			})
			pause := func() {
				if err := cluster.Pause(member); err != nil {
					t.Error(err)
				}
				paused = true
			}
			if continues {
				lessor.before = func() {
					if err := cluster.Continue(member); err != nil {
						t.Error(err)
					}
					paused = false
				}
			}
			waitCtx, giveUp := context.WithCancel(ctx)
			kv.onCommit(func(txn *hookedTxn) (*clientv3.TxnResponse, error) {
				pause()
				return txn.Txn.Commit()
			})
			onItsWay := sent.expect()
			go func() {
				<-onItsWay
				giveUp()
			}()
			// A member that stays paused outlasts the release's bound:
			// that bound is the product's, meant to fire here. One that
			// continues answers within the test's own bound.
			closeTimeout := callBound(t)
			if !continues {
				closeTimeout = time.Second
			}
			s, err := session.Wait(waitCtx, lessor, "r", "A", session.Options{TTL: time.Minute, CloseTimeout: closeTimeout})
			if s != nil {
				t.Fatalf("Wait returned a session after its context ended: epoch %d", s.Epoch())
			}
			var unknown *session.OutcomeError
			if !errors.As(err, &unknown) || !errors.Is(err, leases.ErrOutcomeUnknown) || !errors.Is(err, context.Canceled) {
				t.Fatalf("Wait: %v; want an *OutcomeError matching ErrOutcomeUnknown and context.Canceled", err)
			}
			t.Logf("Wait: %v", err)
			if unknown.Lease.Epoch != 1 || unknown.Lease.Holder != "A" {
				t.Fatalf("the lease in doubt: %+v; want epoch 1 of A", unknown.Lease)
			}
			if !continues && unknown.Released {
				t.Fatal("released through a member that was paused")
			}
			if continues && !unknown.Released {
				t.Fatalf("not released through a member that continued: %v", unknown.ReleaseErr)
			}
		})
	}
}

// releaseHook is a lessor that calls before, once, as its first release
// begins.
type releaseHook struct {
	leases.Lessor
	before func()
	once   sync.Once
}

func (l *releaseHook) Release(ctx context.Context, held leases.Lease) error {
	if l.before != nil {
		l.once.Do(l.before)
	}
	return l.Lessor.Release(ctx, held)
}
