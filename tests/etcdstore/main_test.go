package etcdstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"leases/etcd"
	"leases/etcdcluster"
	"leases/internal/roles"
	"leases/testkit/testctx"
)

// The tests of this package share one three-member cluster, started by the
// first test that needs it and closed after the last; each test works
// under a key prefix of its own, so that none sees another's keys. Tests
// that stop members start a cluster of their own.
var shared struct {
	once    sync.Once
	cluster *etcdcluster.Cluster
	err     error
}

// TestMain lets this binary play an etcd member (etcdcluster re-executes
// it), and closes the shared cluster after the last test. A member of it
// that ended unbidden fails the run.
func TestMain(m *testing.M) {
	roles.Run()
	code := m.Run()
	if shared.cluster != nil {
		if err := errors.Join(shared.cluster.Err(), shared.cluster.Close()); err != nil {
			fmt.Fprintln(os.Stderr, "the shared cluster:", err)
			code = 1
		}
	}
	os.Exit(roles.CheckUnused(code))
}

// sharedCluster starts the shared cluster on first use, bounded by the
// calling test's context.
func sharedCluster(t testing.TB) *etcdcluster.Cluster {
	t.Helper()
	shared.once.Do(func() {
		shared.cluster, shared.err = etcdcluster.Start(testContext(t), etcdcluster.Options{})
	})
	if shared.err != nil {
		t.Fatalf("start the shared cluster: %v", shared.err)
	}
	return shared.cluster
}

// ownCluster is a cluster of the test's own, for a test that kills,
// pauses or cuts off members.
func ownCluster(t *testing.T) *etcdcluster.Cluster {
	t.Helper()
	c, err := etcdcluster.Start(testContext(t), etcdcluster.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// testContext bounds a test's waits by its deadline, less a margin so that
// a hang fails with a message (testctx.Context); it never paces anything.
func testContext(t testing.TB) context.Context { return testctx.Context(t) }

// client returns a client of every member of the shared cluster.
func client(t testing.TB) *clientv3.Client {
	t.Helper()
	c, err := sharedCluster(t).Client(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// prefix is a key prefix of the test's own.
func prefix(t testing.TB) string {
	return "/test/" + strings.ReplaceAll(t.Name(), "/", "|") + "/"
}

// options are a store's under the test's own prefix, with a call bound
// that never cuts a call of a slow but working run (callBound).
func options(t testing.TB) etcd.Options {
	return etcd.Options{Prefix: prefix(t), CallTimeout: callBound(t)}
}

// callBound is the test's own bound (testctx.Bound), at most a day: the
// tests here are about what etcd decides, and a call cut by
// etcd.DefaultCallTimeout on a loaded machine would be an unknown outcome
// no test expects. The partition tests measure the default.
func callBound(t testing.TB) time.Duration { return min(testctx.Bound(t), 24*time.Hour) }

// newStore is a store on the shared cluster under the test's own prefix.
func newStore(t testing.TB) *etcd.Store {
	t.Helper()
	return etcd.New(client(t), options(t))
}
