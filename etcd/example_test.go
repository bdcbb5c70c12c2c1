package etcd_test

import (
	"context"
	"crypto/tls"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"leases"
	"leases/clock"
	"leases/etcd"
)

// openStore opens the leases kept in an etcd cluster: the client is
// etcd's own, built with its config (endpoints, dial timeout, TLS), and
// closed by the caller after the store's last call.
//
// Its imports:
//
//	import (
//		"crypto/tls"
//		"time"
//
//		clientv3 "go.etcd.io/etcd/client/v3"
//
//		"leases/etcd"
//	)
func openStore(endpoints []string, tlsConfig *tls.Config) (*etcd.Store, *clientv3.Client, error) {
	client, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, TLS: tlsConfig})
	if err != nil {
		return nil, nil, err
	}
	return etcd.New(client, etcd.Options{Prefix: "/leases/"}), client, nil
}

// acquireReport acquires a lease on the etcd store, timed by this
// process's clock.
func acquireReport(ctx context.Context, store *etcd.Store) (leases.Lease, error) {
	return clock.Lessor(store.Authority(), clock.Wall{}).Acquire(ctx, "report", "worker-1", 10*time.Second)
}

// The store as a service opens it; the example is compiled, not run (it
// needs a cluster: the etcd tests start one).
func Example() {
	store, client, err := openStore([]string{"127.0.0.1:2379"}, nil)
	if err != nil {
		return
	}
	defer client.Close()
	_, _ = acquireReport(context.Background(), store)
}
