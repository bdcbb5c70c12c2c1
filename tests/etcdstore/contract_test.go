package etcdstore_test

import (
	"fmt"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"leases"
	"leases/etcd"
	"leases/testkit/contract"
)

// The contract, on a three-member cluster.
func TestContract(t *testing.T) {
	contract.Run(t, etcdBackend)
}

// etcdBackend is a store on the shared cluster under a prefix of the
// test's own.
func etcdBackend(t *testing.T) contract.Backend {
	t.Helper()
	c, p := client(t), prefix(t)
	s := etcd.New(c, options(t))
	return contract.Backend{
		Authority: s.Authority(),
		Fenced:    s.Receiver(leases.Fenced),
		Unfenced:  s.Receiver(leases.Unfenced),
		Guarded:   s.Guarded(),
		Receiver:  s.Receiver,
		State:     func(t *testing.T) string { return dumpPrefix(t, c, p) },
	}
}

// dumpPrefix renders every key under prefix with its value and the
// revision that last wrote it: a rewrite of the same value shows too.
func dumpPrefix(t testing.TB, c *clientv3.Client, prefix string) string {
	t.Helper()
	resp, err := c.Get(testContext(t), prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for _, kv := range resp.Kvs {
		fmt.Fprintf(&out, "%s @%d %s\n", strings.TrimPrefix(string(kv.Key), prefix), kv.ModRevision, kv.Value)
	}
	return out.String()
}
