package main

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"leases/testkit/testctx"
	"leases/tests/etcdcluster"
)

// The command on etcd (a one-member cluster started by the test, its
// member a process of this test binary, with package
// leases/tests/etcdcluster):
// the explicit operations and their refusals, holders' bounds, run's
// epoch and release, run stopped when the lease is released under it,
// and two runs that exclude each other (the waiter woken by etcd's watch).
func TestOnEtcd(t *testing.T) {
	ctx := testctx.Context(t)
	cluster, err := etcdcluster.Start(ctx, etcdcluster.Options{Members: 1, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cluster.Close(); err != nil {
			t.Error(err)
		}
	})
	store := func(t *testing.T) []string {
		return []string{"--etcd", strings.Join(cluster.Endpoints(), ","), "--prefix", "/test/" + t.Name() + "/"}
	}

	t.Run("explicit operations", func(t *testing.T) {
		store := store(t)
		var a leaseJSON
		granting := time.Now()
		r := invoke(t, nil, commandLine(store, "acquire", "jobs/a", "--holder", "alice", "--ttl", "30s", "--json")...)
		if r.code != exitOK || json.Unmarshal([]byte(r.stdout), &a) != nil || a.Epoch != 1 || *a.ExpiresInMs != 30_000 {
			t.Fatalf("acquire: %v; want epoch 1 for 30s", r)
		}
		// The time left is a bound, whole seconds, never below what the
		// lease can have left however long the two calls took.
		r = invoke(t, nil, commandLine(store, "acquire", "jobs/a", "--holder", "bob", "--ttl", "30s")...)
		elapsed := time.Since(granting)
		m := regexp.MustCompile(`"jobs/a" is held by "alice" at epoch 1 for at most (\d+)s more`).FindStringSubmatch(r.stderr)
		if r.code != exitRefused || m == nil {
			t.Fatalf("acquire of a held lease: %v", r)
		}
		if bound, _ := strconv.Atoi(m[1]); float64(bound) < (30*time.Second-elapsed).Seconds() || bound > 31 {
			t.Fatalf("acquire of a held lease %v after the grant: %v; want a bound of at least what is left of 30s, and at most 31s", elapsed, r)
		}
		var listed holdersJSON
		if r := invoke(t, nil, commandLine(store, "holders", "--json")...); json.Unmarshal([]byte(r.stdout), &listed) != nil ||
			listed.Store != "etcd" || !listed.AtTheLatest || len(listed.Leases) != 1 || listed.Leases[0].Holder != "alice" ||
			*listed.Leases[0].ExpiresInMs > 31_000 {
			t.Fatalf("holders: %v; want alice's lease, its expiry a bound of at most 31s", r)
		}
		if r := invoke(t, nil, commandLine(store, "holders")...); r.code != exitOK ||
			!strings.Contains(r.stdout, "at most ") || !strings.Contains(r.stdout, "times: etcd's leader decides") {
			t.Fatalf("holders: %v; want bounds, said as such", r)
		}
		for _, refused := range [][]string{
			{"renew", "jobs/a", "--holder", "alice", "--epoch", "2", "--ttl", "30s"},
			{"release", "jobs/a", "--holder", "bob", "--epoch", "1"},
		} {
			if r := invoke(t, nil, commandLine(store, refused[0], refused[1:]...)...); r.code != exitRefused || !strings.Contains(r.stderr, "not the lease holder") {
				t.Fatalf("%q: %v; want refused", refused, r)
			}
		}
		if r := invoke(t, nil, commandLine(store, "renew", "jobs/a", "--holder", "alice", "--epoch", "1", "--ttl", "30s")...); r.code != exitOK {
			t.Fatalf("renew: %v", r)
		}
		if r := invoke(t, nil, commandLine(store, "release", "jobs/a", "--holder", "alice", "--epoch", "1")...); r.code != exitOK {
			t.Fatalf("release: %v", r)
		}
		if r := invoke(t, nil, commandLine(store, "holders", "jobs/a")...); !strings.Contains(r.stdout, "free") {
			t.Fatalf("holders after the release: %v", r)
		}
		if r := invoke(t, nil, commandLine(store, "acquire", "jobs/a", "--holder", "bob", "--ttl", "1s", "--json")...); !strings.Contains(r.stdout, `"epoch":2`) {
			t.Fatalf("acquire after the release: %v; want epoch 2", r)
		}
	})

	t.Run("run", func(t *testing.T) { runPassesTheLease(t, store(t)) })
	t.Run("run stopped when its lease is released", func(t *testing.T) { runStoppedWhenReleased(t, store(t)) })
	t.Run("two runs exclude each other", func(t *testing.T) { runsExcludeEachOther(t, store(t)...) })
}
