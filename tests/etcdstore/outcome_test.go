package etcdstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"leases"
	"leases/etcd"
)

// The three kinds of errors, on a cluster of the test's own that loses its
// quorum: a call whose context ended before anything was sent fails before
// commit; a read that cannot complete fails before commit; a transaction
// with a write that was sent and got no answer is ErrOutcomeUnknown, an
// acquire then returning the lease it would have granted. The store goes
// on afterwards, once the quorum is back.
func TestErrorKindsWhenQuorumIsLost(t *testing.T) {
	ctx, cluster := testContext(t), ownCluster(t)
	const survivor = 0
	c, err := cluster.MemberClient(ctx, survivor)
	if err != nil {
		t.Fatal(err)
	}
	atCommit := &hookedKV{KV: c.KV}
	c.KV = atCommit
	store := etcd.New(c, etcd.Options{CallTimeout: callBound(t)})
	a := store.Authority()
	held, err := a.Acquire(ctx, "r", "A", 0, 100)
	if err != nil {
		t.Fatal(err)
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := a.Renew(cancelled, held, 1, 100); !errors.Is(err, context.Canceled) || errors.Is(err, leases.ErrOutcomeUnknown) {
		t.Fatalf("renew with an ended context: %v; want context.Canceled, not an unknown outcome", err)
	}

	for _, i := range []int{1, 2} {
		if err := cluster.Kill(i); err != nil {
			t.Fatal(err)
		}
	}
	// Without a quorum nothing completes: each call is ended by its
	// context. A read may be ended at any time, which is always before
	// commit, so a short bound ends it. A transaction must be ended only
	// once it was handed to etcd's client, so no timer decides that: its
	// context ends the moment the store commits it.
	readBound := func() context.Context {
		ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		t.Cleanup(cancel)
		return ctx
	}
	endedAtCommit := func() context.Context {
		ctx, cancel := context.WithCancel(ctx)
		t.Cleanup(cancel)
		atCommit.onCommit(func(txn *hookedTxn) (*clientv3.TxnResponse, error) {
			cancel()
			return txn.Txn.Commit()
		})
		return ctx
	}
	// A store that has seen nothing guesses the row absent, which decides
	// a refusal; a refusal is confirmed by a transaction that only reads.
	noGuess := etcd.New(c, etcd.Options{CallTimeout: callBound(t)}).Authority()
	if _, err := noGuess.Renew(readBound(), held, 1, 100); !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, leases.ErrOutcomeUnknown) {
		t.Fatalf("renew whose read cannot complete: %v; want a failure before commit", err)
	}
	if _, err := a.Renew(endedAtCommit(), held, 1, 100); !errors.Is(err, leases.ErrOutcomeUnknown) {
		t.Fatalf("renew whose transaction was sent: %v; want ErrOutcomeUnknown", err)
	}
	wouldBe, err := a.Acquire(endedAtCommit(), "fresh", "A", 1, 10)
	if !errors.Is(err, leases.ErrOutcomeUnknown) || wouldBe != leaseOf("fresh", "A", 1, 1, 11) {
		t.Fatalf("acquire whose transaction was sent: %+v, %v; want the would-be lease and ErrOutcomeUnknown", wouldBe, err)
	}

	for _, i := range []int{1, 2} {
		if err := cluster.Restart(ctx, i); err != nil {
			t.Fatal(err)
		}
	}
	// Either outcome may have taken effect; the same store sees which.
	switch again, err := a.Acquire(ctx, "fresh", "A", 1, 10); {
	case errors.Is(err, leases.ErrLeaseHeld):
	case err == nil && again == wouldBe:
	default:
		t.Fatalf("acquire again after the quorum came back: %+v, %v; want ErrLeaseHeld or the same lease", again, err)
	}
	if _, err := a.Renew(ctx, held, 2, 100); err != nil {
		t.Fatalf("renew after the quorum came back: %v", err)
	}
}
