package etcdstore_test

import (
	"testing"
	"time"

	"leases/clock"
	"leases/etcd"
	"leases/session"
)

// A waiting acquire on etcd learns of another client's release through a
// watch: it is granted right after the release, at a tick below the
// released lease's expiry, and not before.
func TestSessionWaitLearnsOfAnotherClientsRelease(t *testing.T) {
	ctx := testContext(t)
	holderSide := etcd.New(client(t), options(t)).Authority()
	waiterSide := etcd.New(client(t), options(t)).Authority()
	clk := clock.NewManual(0)
	a, err := session.Start(ctx, clock.Lessor(holderSide, clk), "r", "A",
		session.Options{TTL: 50 * time.Millisecond, Margin: time.Millisecond, RenewEvery: 48 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		s   *session.Session
		err error
	}
	got := make(chan result, 1)
	go func() {
		s, err := session.Wait(ctx, clock.Lessor(waiterSide, clk), "r", "B",
			session.Options{TTL: 5 * time.Millisecond, Margin: time.Millisecond})
		got <- result{s, err}
	}()
	if err := clk.Waiters(ctx, 3); err != nil { // A's renewal and deadline, B's wait for tick 50
		t.Fatal(err)
	}
	if err := clk.Advance(7); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		t.Fatalf("B was granted while A held the lease: %+v, %v", r.s, r.err)
	default:
	}
	if err := a.Close(ctx); err != nil { // releases at tick 7, through the other client
		t.Fatal(err)
	}
	var r result
	select {
	case r = <-got:
	case <-ctx.Done():
		t.Fatal("B was not granted after A's release")
	}
	if r.err != nil || r.s.Epoch() != 2 || r.s.Lease().GrantedAt != 7 {
		t.Fatalf("B: %+v, %v; want epoch 2 granted at tick 7, right after the release", r.s, r.err)
	}
	_ = r.s.Close(ctx)
}
