package etcdcluster

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"leases/internal/testctx"
)

// testContext bounds a test's waits by its deadline, less a margin so that
// a hang fails with a message (testctx.Context).
func testContext(t *testing.T) context.Context { return testctx.Context(t) }

// A member stopped hard loses nothing that was committed, the others elect
// a leader without it, and once restarted it serves what was written
// meanwhile. Nothing the cluster started runs after Close.
func TestStopRestartAndClose(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx := testContext(t)
	start := time.Now()
	c, err := Start(ctx, t.TempDir(), 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("three members ready, leader elected: %v", time.Since(start))
	client, err := c.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	put := func(key, value string) {
		t.Helper()
		if _, err := client.Put(ctx, key, value); err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
	}
	put("before", "1")
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(leader); err != nil {
		t.Fatal(err)
	}
	next, err := c.Leader(ctx)
	if err != nil || next == leader {
		t.Fatalf("leader after stopping member %d: %d, %v", leader, next, err)
	}
	put("during", "2")
	if err := c.Restart(ctx, leader); err != nil {
		t.Fatal(err)
	}
	only, err := c.MemberClient(ctx, leader)
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{"before": "1", "during": "2"} {
		resp, err := only.Get(ctx, key)
		if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != want {
			t.Fatalf("restarted member %d reads %s: %v, %v; want %s", leader, key, resp, err, want)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client(ctx); err == nil {
		t.Fatal("a closed cluster handed out a client")
	}
}

// Each member's client URL is its own, and a member client reaches only
// that member.
func TestEndpointsAndMemberClients(t *testing.T) {
	ctx := testContext(t)
	c, err := Start(ctx, t.TempDir(), 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	endpoints := c.Endpoints()
	seen := map[string]bool{}
	for i, endpoint := range endpoints {
		if seen[endpoint] {
			t.Fatalf("endpoint %s twice in %v", endpoint, endpoints)
		}
		seen[endpoint] = true
		client, err := c.MemberClient(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		if got := client.Endpoints(); len(got) != 1 || got[0] != endpoint {
			t.Fatalf("member %d's client talks to %v, want [%s]", i, got, endpoint)
		}
		status, err := client.Status(ctx, endpoint)
		if err != nil {
			t.Fatal(err)
		}
		if status.Header.MemberId != uint64(c.members[i].etcd.Server.MemberID()) {
			t.Fatalf("endpoint %s is member %x, want member %d", endpoint, status.Header.MemberId, i)
		}
	}
	if _, err := c.MemberClient(ctx, len(endpoints)); err == nil {
		t.Fatal("a client of a member that does not exist")
	}
}
