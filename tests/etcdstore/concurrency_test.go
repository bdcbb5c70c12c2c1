package etcdstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"leases"
	"leases/etcd"
)

// clients returns one client per member of the shared cluster and one of
// all of them: concurrent callers then reach the cluster through
// different members, as processes on different machines would.
func clients(t *testing.T) []*clientv3.Client {
	t.Helper()
	ctx, cluster := testContext(t), sharedCluster(t)
	var all []*clientv3.Client
	for i := range len(cluster.Endpoints()) {
		c, err := cluster.MemberClient(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		all = append(all, c)
	}
	return append(all, client(t))
}

// together runs do(i) for i in 0..n-1, each in a goroutine of its own,
// released at once once all have started, and waits for all of them.
func together(n int, do func(i int)) {
	var started, done sync.WaitGroup
	release := make(chan struct{})
	for i := range n {
		started.Add(1)
		done.Go(func() {
			started.Done()
			<-release
			do(i)
		})
	}
	started.Wait()
	close(release)
	done.Wait()
}

// history returns every value key has had, oldest first, from etcd's own
// record of the key's revisions (nothing is compacted here).
func history(t *testing.T, c *clientv3.Client, key string) [][]byte {
	t.Helper()
	ctx, cancel := context.WithCancel(testContext(t))
	defer cancel()
	last, err := c.Get(ctx, key)
	if err != nil || len(last.Kvs) == 0 {
		t.Fatalf("get %s: %v, %v", key, last, err)
	}
	final := last.Kvs[0].ModRevision
	var values [][]byte
	for resp := range c.Watch(ctx, key, clientv3.WithRev(1)) {
		if err := resp.Err(); err != nil {
			t.Fatalf("watch %s: %v", key, err)
		}
		for _, ev := range resp.Events {
			values = append(values, ev.Kv.Value)
			if ev.Kv.ModRevision == final {
				return values
			}
		}
	}
	t.Fatalf("watch %s ended before revision %d: %v", key, final, ctx.Err())
	return nil
}

// Many acquirers on one resource at the same tick, through different
// members and stores: exactly one is granted, with the next epoch, round
// after round, and etcd's history of the row shows each epoch once.
func TestOneGrantAmongConcurrentAcquirers(t *testing.T) {
	const acquirers, rounds, ttl = 8, 6, 10
	ctx, cs := testContext(t), clients(t)
	stores := make([]leases.Authority, acquirers)
	for i := range stores {
		stores[i] = etcd.New(cs[i%len(cs)], options(t)).Authority()
	}
	for round := range int64(rounds) {
		granted := make([]leases.Lease, acquirers)
		errs := make([]error, acquirers)
		together(acquirers, func(i int) {
			granted[i], errs[i] = stores[i].Acquire(ctx, "r", fmt.Sprint("holder-", i), round*ttl, ttl)
		})
		var winners []leases.Lease
		for i, err := range errs {
			switch {
			case err == nil:
				winners = append(winners, granted[i])
			case !errors.Is(err, leases.ErrLeaseHeld):
				t.Fatalf("round %d, acquirer %d: %v; want a grant or ErrLeaseHeld", round, i, err)
			}
		}
		if len(winners) != 1 || winners[0].Epoch != round+1 {
			t.Fatalf("round %d: granted %+v; want exactly one lease, epoch %d", round, winners, round+1)
		}
	}
	for i, value := range history(t, cs[0], prefix(t)+"authority/r") {
		var row struct{ Epoch int64 }
		if err := json.Unmarshal(value, &row); err != nil || row.Epoch != int64(i+1) {
			t.Fatalf("version %d of the row has epoch %d (%v); want %d: an epoch was granted twice or skipped", i+1, row.Epoch, err, i+1)
		}
	}
}

// Many writers with mixed epochs, through different members and stores:
// the fence never goes down and each epoch's value is stored at most
// once, in every version etcd ever held, and the highest epoch wins.
func TestFenceNeverGoesDownUnderConcurrentWriters(t *testing.T) {
	const writers, epochs = 8, 12
	ctx, cs := testContext(t), clients(t)
	accepted := make([][]int64, writers)
	errs := make([]error, writers)
	together(writers, func(w int) {
		r := etcd.New(cs[w%len(cs)], options(t)).Receiver(leases.Fenced)
		for n := range epochs {
			epoch := int64((n*5+w*7)%epochs + 1) // each writer its own order of 1..epochs
			got, err := r.Write(ctx, "r", epoch, fmt.Sprintf("w%d-e%d", w, epoch))
			if err != nil {
				errs[w] = err
				return
			}
			if got.Outcome == leases.Accepted {
				accepted[w] = append(accepted[w], epoch)
			}
		}
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	perEpoch := map[int64]int{}
	for _, list := range accepted {
		for _, epoch := range list {
			perEpoch[epoch]++
		}
	}
	for epoch, n := range perEpoch {
		if n > 1 {
			t.Errorf("epoch %d accepted %d times; want one value per epoch", epoch, n)
		}
	}
	var fence int64
	values := map[int64]string{}
	for i, raw := range history(t, cs[0], prefix(t)+"fenced/r") {
		var rec leases.Record
		if err := json.Unmarshal(raw, &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Epoch < fence {
			t.Fatalf("version %d: the fence went down from %d to %d", i+1, fence, rec.Epoch)
		}
		if v, ok := values[rec.ValueEpoch]; ok && v != rec.Value {
			t.Fatalf("version %d: epoch %d stored %q after %q", i+1, rec.ValueEpoch, rec.Value, v)
		}
		fence, values[rec.ValueEpoch] = rec.Epoch, rec.Value
	}
	if fence != epochs {
		t.Fatalf("final fence %d, want %d", fence, epochs)
	}
}

// After acquires, renewals and releases, etcd holds one row per resource
// and nothing else: no etcd lease, no lock key, no other key anywhere.
func TestNothingLeftAfterRelease(t *testing.T) {
	ctx, c := testContext(t), client(t)
	a := etcd.New(c, options(t)).Authority()
	for _, resource := range []string{"r1", "r2"} {
		held, err := a.Acquire(ctx, resource, "A", 0, 5)
		if err == nil {
			held, err = a.Renew(ctx, held, 1, 5)
		}
		if err == nil {
			err = a.Release(ctx, held, 2)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	want := "authority/r1 " + `{"epoch":1,"holder":"","held":false,"granted_at":0,"expires_at":2,"last_tick":2}` + "\n" +
		"authority/r2 " + `{"epoch":1,"holder":"","held":false,"granted_at":0,"expires_at":2,"last_tick":2}` + "\n"
	resp, err := c.Get(ctx, prefix(t), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	got := ""
	for _, kv := range resp.Kvs {
		got += string(kv.Key[len(prefix(t)):]) + " " + string(kv.Value) + "\n"
	}
	if got != want {
		t.Fatalf("left behind:\n%s\nwant only the rows that keep the epochs:\n%s", got, want)
	}
	if leasesLeft, err := c.Leases(ctx); err != nil || len(leasesLeft.Leases) != 0 {
		t.Fatalf("etcd leases left: %+v, %v; want none", leasesLeft, err)
	}
}

// What one store remembers never decides an answer: after another store
// (another process) changed a resource, a refusal or a replay that the
// first store's last view would give is not given; the answer is decided
// on what etcd holds.
func TestAnswersAreDecidedOnWhatEtcdHolds(t *testing.T) {
	ctx, cs := testContext(t), clients(t)
	x := etcd.New(cs[0], options(t))
	y := etcd.New(cs[1], options(t))
	held, err := x.Authority().Acquire(ctx, "r", "A", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if err := y.Authority().Release(ctx, held, 5); err != nil {
		t.Fatal(err)
	}
	if got, err := x.Authority().Acquire(ctx, "r", "B", 6, 10); err != nil || got != leaseOf("r", "B", 2, 6, 16) {
		t.Fatalf("acquire after another store's release: %+v, %v; want epoch 2 granted", got, err)
	}
	if _, err := x.Receiver(leases.Fenced).Write(ctx, "r", 1, "v"); err != nil {
		t.Fatal(err)
	}
	if _, err := y.Receiver(leases.Fenced).Write(ctx, "r", 2, "w"); err != nil {
		t.Fatal(err)
	}
	if got, err := x.Receiver(leases.Fenced).Write(ctx, "r", 1, "v"); err != nil || got.Outcome != leases.Stale || got.Record != written(2, "w") {
		t.Fatalf("resend of epoch 1 after another store wrote epoch 2: %+v, %v; want stale", got, err)
	}
}
