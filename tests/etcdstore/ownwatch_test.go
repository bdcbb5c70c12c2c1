package etcdstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"leases"
	"leases/etcd"
)

// txnCounter counts the transactions a client sends: the reads of a
// batch's holder keys are transactions, its barrier read a Range.
type txnCounter struct{ txns atomic.Int64 }

func (c *txnCounter) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if method == "/etcdserverpb.KV/Txn" {
		c.txns.Add(1)
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// A Lessor holding more tenures than a batch reads (etcd's watch answers
// a batch of more than 256 renewals): a holder key deleted by hand,
// through another client, ends its tenure at its next renewal, and the
// others are renewed, with fewer reads than the batch's 300 keys would
// take (three transactions of at most 128 Gets).
func TestALargeBatchSeesAKeyDeletedElsewhere(t *testing.T) {
	ctx := testContext(t)
	counted := &txnCounter{}
	c, err := clientv3.New(clientv3.Config{Endpoints: sharedCluster(t).Endpoints(), Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(counted.unary)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	l := etcd.New(c, options(t)).Lessor()
	const n = 300
	held := make([]leases.Lease, n)
	t.Cleanup(func() { // so that another run on the shared cluster finds the resources free
		for _, h := range held {
			if h.Epoch != 0 {
				_ = l.Release(context.Background(), h)
			}
		}
	})
	for i := range held {
		if held[i], err = l.Acquire(ctx, fmt.Sprint("r", i), "A", time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	renewAll := func() []error {
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range held {
			if held[i].Epoch != 0 {
				wg.Go(func() { _, errs[i] = l.Renew(ctx, held[i], time.Hour) })
			}
		}
		wg.Wait()
		return errs
	}
	for i, err := range renewAll() { // the watch started at the 257th grant; these make the first keys known to it
		if err != nil {
			t.Fatalf("renewal of r%d: %v", i, err)
		}
	}
	if _, err := client(t).Delete(ctx, prefix(t)+"held/r7"); err != nil {
		t.Fatal(err)
	}
	before := counted.txns.Load()
	for i, err := range renewAll() {
		if i == 7 {
			if !errors.Is(err, leases.ErrLeaseExpired) {
				t.Fatalf("renewal of r7, whose key was deleted: %v; want ErrLeaseExpired", err)
			}
		} else if err != nil {
			t.Fatalf("renewal of r%d: %v", i, err)
		}
	}
	held[7] = leases.Lease{} // ended
	// How the round splits into batches is the scheduler's: the first
	// renewal goes alone, and those that join while its keep-alive is in
	// flight go next, one batch on a quiet machine, but under -race on a
	// busy one a round has been three batches of fewer than 256, each
	// read. So the round is renewed again until one of its batches was
	// the watch's (fewer transactions than three of 128 Gets), a few
	// times at most.
	counts := []int64{counted.txns.Load() - before}
	for len(counts) < 10 && counts[len(counts)-1] >= 3 {
		before = counted.txns.Load()
		for i, err := range renewAll() {
			if err != nil {
				t.Fatalf("renewal of r%d: %v", i, err)
			}
		}
		counts = append(counts, counted.txns.Load()-before)
	}
	if counts[len(counts)-1] >= 3 {
		t.Fatalf("transactions for each of %d rounds of %d renewals: %v; want fewer than three in one (the watch answers a batch of more than 256)", len(counts), n, counts)
	}
}
