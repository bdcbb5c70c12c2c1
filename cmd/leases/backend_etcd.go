package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

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
		prefix: "the key prefix of the leases (default " + etcd.DefaultPrefix + ")",
		ttls: "etcd's leases are whole seconds, and never shorter than its minimum (one and a half election timeouts: " +
			"2s with etcd's default 1s); a renewal gives the TTL of the grant",
		open: openEtcd,
	})
}

func openEtcd(_ context.Context, endpoints string, o openOptions) (*store, error) {
	var list []string
	for _, e := range strings.Split(endpoints, ",") {
		e = strings.TrimSpace(e)
		if err := checkEndpoint(endpoints, e); err != nil {
			return nil, err
		}
		list = append(list, e)
	}
	// clientv3.New does not connect: the first call does, under its bound.
	client, err := clientv3.New(clientv3.Config{Endpoints: list, DialTimeout: o.timeout, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("etcd client of %s: %w", endpoints, err)
	}
	// The store's own bound on each call is --timeout too: each call
	// comes under --timeout's context, made first, which so ends first
	// and says "--timeout D passed" (etcd.ErrCallTimeout names an option
	// of the library, not of this command).
	raw := etcd.New(client, etcd.Options{Prefix: o.prefix, CallTimeout: o.timeout}).Lessor()
	return &store{raw: raw, close: client.Close, unanswered: func() string { return probe(list, o.timeout) }}, nil
}

// checkEndpoint refuses an endpoint e (of the list all) that is not
// host:port or http://host:port: etcd's client would take it, and fail
// only once --timeout has passed, naming nothing.
func checkEndpoint(all, e string) error {
	want := "want host:port or http://host:port"
	if e == "" {
		return usagef("etcd endpoints %q: an empty endpoint; %s[,...]", all, want)
	}
	hostport := e
	if strings.Contains(e, "://") {
		u, err := url.Parse(e)
		switch {
		case err != nil:
			return usagef("etcd endpoint %q is not a URL (%v); %s", e, err, want)
		case u.Scheme == "https":
			return usagef("etcd endpoint %q: https, but TLS is not wired into leases (docs/operators.md); %s", e, want)
		case u.Scheme != "http":
			return usagef("etcd endpoint %q: scheme %q; %s", e, u.Scheme, want)
		case u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "":
			return usagef("etcd endpoint %q has more than a host and a port; %s", e, want)
		}
		hostport = u.Host
	}
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return usagef("etcd endpoint %q is not host:port (%v); %s", e, err, want)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || host == "" {
		return usagef("etcd endpoint %q: the host is empty or the port not 1 to 65535; %s", e, want)
	}
	return nil
}

// probe says, after a call that --timeout cut, what each endpoint does
// when connected to: refuses (nothing listens), accepts (something
// listens that did not answer as etcd, or an etcd that could not decide),
// or nothing within the bound. The probes run at once, each bounded by
// timeout and by a second, the longest a connection on a working network
// takes to be refused or accepted.
func probe(endpoints []string, timeout time.Duration) string {
	said := make([]string, len(endpoints))
	var wg sync.WaitGroup
	for i, e := range endpoints {
		wg.Go(func() {
			hostport := strings.TrimPrefix(e, "http://")
			hostport = strings.TrimSuffix(hostport, "/")
			bound := min(timeout, time.Second)
			conn, err := net.DialTimeout("tcp", hostport, bound)
			switch {
			case err == nil:
				_ = conn.Close()
				said[i] = fmt.Sprintf("etcd at %s accepts connections, but no answer came in time", e)
			case isTimeout(err):
				said[i] = fmt.Sprintf("etcd at %s: no connection within %v", e, bound)
			default:
				said[i] = fmt.Sprintf("etcd at %s: %v", e, err)
			}
		})
	}
	wg.Wait()
	return strings.Join(said, "; ")
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
