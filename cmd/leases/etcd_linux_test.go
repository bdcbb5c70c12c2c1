package main

import (
	"encoding/json"
	"strings"
	"testing"

	"leases/etcd/etcdtest"
	"leases/internal/testctx"
)

// The command on etcd (a one-member cluster started by the test, in this
// process, with package leases/etcd/etcdtest, which builds on Linux):
// the explicit operations and their refusals, holders' bounds, run's
// epoch and release, run stopped when the lease is released under it,
// and two runs that exclude each other (the waiter woken by etcd's watch).
func TestOnEtcd(t *testing.T) {
	ctx := testctx.Context(t)
	cluster, err := etcdtest.Start(ctx, t.TempDir(), 1)
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
	// with is a command line: the command, the store's flags, the rest.
	with := func(store []string, command string, args ...string) []string {
		return append(append([]string{command}, store...), args...)
	}

	t.Run("explicit operations", func(t *testing.T) {
		store := store(t)
		var a leaseJSON
		r := invoke(t, nil, with(store, "acquire", "jobs/a", "--holder", "alice", "--ttl", "30s", "--json")...)
		if r.code != exitOK || json.Unmarshal([]byte(r.stdout), &a) != nil || a.Epoch != 1 || *a.ExpiresInMs != 30_000 {
			t.Fatalf("acquire: %v; want epoch 1 for 30s", r)
		}
		if r := invoke(t, nil, with(store, "acquire", "jobs/a", "--holder", "bob", "--ttl", "30s")...); r.code != exitRefused ||
			!strings.Contains(r.stderr, `"jobs/a" is held by "alice" at epoch 1 for at most 3`) {
			t.Fatalf("acquire of a held lease: %v", r)
		}
		var listed holdersJSON
		if r := invoke(t, nil, with(store, "holders", "--json")...); json.Unmarshal([]byte(r.stdout), &listed) != nil ||
			listed.Store != "etcd" || !listed.AtTheLatest || len(listed.Leases) != 1 || listed.Leases[0].Holder != "alice" ||
			*listed.Leases[0].ExpiresInMs > 31_000 {
			t.Fatalf("holders: %v; want alice's lease, its expiry a bound of at most 31s", r)
		}
		if r := invoke(t, nil, with(store, "holders")...); r.code != exitOK ||
			!strings.Contains(r.stdout, "at most ") || !strings.Contains(r.stdout, "times: etcd's leader decides") {
			t.Fatalf("holders: %v; want bounds, said as such", r)
		}
		for _, refused := range [][]string{
			{"renew", "jobs/a", "--holder", "alice", "--epoch", "2", "--ttl", "30s"},
			{"release", "jobs/a", "--holder", "bob", "--epoch", "1"},
		} {
			if r := invoke(t, nil, with(store, refused[0], refused[1:]...)...); r.code != exitRefused || !strings.Contains(r.stderr, "not the lease holder") {
				t.Fatalf("%q: %v; want refused", refused, r)
			}
		}
		if r := invoke(t, nil, with(store, "renew", "jobs/a", "--holder", "alice", "--epoch", "1", "--ttl", "30s")...); r.code != exitOK {
			t.Fatalf("renew: %v", r)
		}
		if r := invoke(t, nil, with(store, "release", "jobs/a", "--holder", "alice", "--epoch", "1")...); r.code != exitOK {
			t.Fatalf("release: %v", r)
		}
		if r := invoke(t, nil, with(store, "holders", "jobs/a")...); !strings.Contains(r.stdout, "free") {
			t.Fatalf("holders after the release: %v", r)
		}
		if r := invoke(t, nil, with(store, "acquire", "jobs/a", "--holder", "bob", "--ttl", "1s", "--json")...); !strings.Contains(r.stdout, `"epoch":2`) {
			t.Fatalf("acquire after the release: %v; want epoch 2", r)
		}
	})

	t.Run("run", func(t *testing.T) {
		store := store(t)
		r := start(t, append(with(store, "run", "jobs/r", "--holder", "runner", "--ttl", "5s", "--"), cmd(t, "env", "5")...)...).wait()
		if r.code != 5 || r.stdout != "LEASES_RESOURCE=jobs/r LEASES_HOLDER=runner LEASES_EPOCH=1\n" {
			t.Fatalf("run: %v; want CMD's status 5 and epoch 1", r)
		}
		if r := invoke(t, nil, with(store, "holders", "jobs/r")...); !strings.Contains(r.stdout, "free") {
			t.Fatalf("holders after run: %v; want jobs/r released", r)
		}
	})

	t.Run("run stopped when its lease is released", func(t *testing.T) {
		store := store(t)
		p := start(t, append(with(store, "run", "jobs/s", "--holder", "h", "--ttl", "3s", "--"), cmd(t, "hold")...)...)
		p.expect(p.stdout, "started 1")
		if r := invoke(t, nil, with(store, "release", "jobs/s", "--holder", "h", "--epoch", "1")...); r.code != exitOK {
			t.Fatalf("release: %v", r)
		}
		if r := p.wait(); r.code != exitLost || !strings.Contains(r.stderr, "the lease on jobs/s at epoch 1 ended before CMD did") {
			t.Fatalf("run: %v; want exit 4", r)
		}
	})

	t.Run("two runs exclude each other", func(t *testing.T) { runsExcludeEachOther(t, store(t)...) })
}
