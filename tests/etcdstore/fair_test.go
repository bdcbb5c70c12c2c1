package etcdstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"leases"
	"leases/etcd"
	"leases/testkit/fairtest"
)

// contender is this binary re-executed as one of the processes that
// contend for one resource: its arguments are the cluster's endpoints
// (comma-separated) and the key prefix.
var contender = fairtest.Role("etcdstore-fair-contender", func(ctx context.Context, args []string) (leases.Lessor, func() error, error) {
	c, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(args[0], ","), Logger: zap.NewNop()})
	if err != nil {
		return nil, nil, err
	}
	return etcd.New(c, etcd.Options{Prefix: args[1]}).Lessor(), c.Close, nil
})

// Six processes, each with a client of its own, wait for one resource of
// the three-member cluster, each releasing it and at once waiting again
// (docs/performance.md has the figures).
func TestSixProcessesTakeTurns(t *testing.T) {
	endpoints := strings.Join(sharedCluster(t).Endpoints(), ",")
	f := fairtest.Run(t, contender, fairtest.Config{}, endpoints, prefix(t))
	t.Log(f)
	fairtest.Check(t, f)
}

// The Lessor grants a resource to its waiters in the order they were
// first refused.
func TestLessorGrantsInArrivalOrder(t *testing.T) {
	fairtest.CheckLine(t, newStore(t).Lessor(), time.Hour)
}
