package main

import (
	"context"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"leases/etcd"
)

// The etcd store: each lease an etcd lease, whose time-to-live etcd's
// leader counts (etcd.Store.Lessor); --prefix chooses the keys (empty:
// etcd.DefaultPrefix).
func init() {
	register(&backend{
		name:  "etcd",
		arg:   "ENDPOINTS",
		help:  "an etcd cluster's client endpoints, comma-separated (host:port or http://host:port), timed by etcd's own leases",
		clock: "this machine's clock; etcd's leader decides",
		note: "etcd's leader decides, and says the whole seconds left: each expiry is this machine's clock " +
			"plus that, plus a second, a bound the lease ends before",
		local:  true,
		bound:  true,
		prefix: "the key prefix of the leases (default " + etcd.DefaultPrefix + ")",
		open:   openEtcd,
	})
}

func openEtcd(_ context.Context, endpoints string, o openOptions) (*store, error) {
	var list []string
	for _, e := range strings.Split(endpoints, ",") {
		if e = strings.TrimSpace(e); e == "" {
			return nil, usagef("--etcd %q: an empty endpoint; want host:port[,host:port...]", endpoints)
		}
		list = append(list, e)
	}
	// clientv3.New does not connect: the first call does, under its bound.
	client, err := clientv3.New(clientv3.Config{Endpoints: list, DialTimeout: o.timeout, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("etcd client of %s: %w", endpoints, err)
	}
	return &store{raw: etcd.New(client, etcd.Options{Prefix: o.prefix}).Lessor(), close: client.Close}, nil
}
