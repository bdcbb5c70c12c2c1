package leasescmd_test

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"leases/etcdcluster"
	"leases/testkit/testctx"
)

// The command on etcd (a one-member cluster started by the test, its
// member a process of this test binary, with package
// leases/etcdcluster): the explicit operations and their refusals,
// holders' bounds, a TTL below etcd's minimum (a warning, in one line),
// run's epoch and release, run stopped when the lease is released under
// it, and two runs that exclude each other (the waiter woken by etcd's
// watch).
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
		r := leases(t, commandLine(store, "acquire", "jobs/a", "--holder", "alice", "--ttl", "30s", "--json")...)
		if r.Code != exitOK || json.Unmarshal([]byte(r.Stdout), &a) != nil || a.Epoch != 1 || *a.ExpiresInMs != 30_000 {
			t.Fatalf("acquire: %v; want epoch 1 for 30s", r)
		}
		// The time left is a bound, whole seconds, never below what the
		// lease can have left however long the two calls took.
		r = leases(t, commandLine(store, "acquire", "jobs/a", "--holder", "bob", "--ttl", "30s")...)
		elapsed := time.Since(granting)
		m := regexp.MustCompile(`"jobs/a" is held by "alice" at epoch 1 for at most (\d+)s more`).FindStringSubmatch(r.Stderr)
		if r.Code != exitRefused || m == nil {
			t.Fatalf("acquire of a held lease: %v", r)
		}
		if bound, _ := strconv.Atoi(m[1]); float64(bound) < (30*time.Second-elapsed).Seconds() || bound > 31 {
			t.Fatalf("acquire of a held lease %v after the grant: %v; want a bound of at least what is left of 30s, and at most 31s", elapsed, r)
		}
		var listed holdersJSON
		if r := leases(t, commandLine(store, "holders", "--json")...); json.Unmarshal([]byte(r.Stdout), &listed) != nil ||
			listed.Store != "etcd" || !listed.AtTheLatest || len(listed.Leases) != 1 || listed.Leases[0].Holder != "alice" ||
			*listed.Leases[0].ExpiresInMs > 31_000 {
			t.Fatalf("holders: %v; want alice's lease, its expiry a bound of at most 31s", r)
		}
		if r := leases(t, commandLine(store, "holders")...); r.Code != exitOK ||
			!strings.Contains(r.Stdout, "at most ") || !strings.Contains(r.Stdout, "times: etcd's leader decides") {
			t.Fatalf("holders: %v; want bounds, said as such", r)
		}
		for _, refused := range [][]string{
			{"renew", "jobs/a", "--holder", "alice", "--epoch", "2", "--ttl", "30s"},
			{"release", "jobs/a", "--holder", "bob", "--epoch", "1"},
		} {
			if r := leases(t, commandLine(store, refused[0], refused[1:]...)...); r.Code != exitRefused || !strings.Contains(r.Stderr, "not the lease holder") {
				t.Fatalf("%q: %v; want refused", refused, r)
			}
		}
		if r := leases(t, commandLine(store, "renew", "jobs/a", "--holder", "alice", "--epoch", "1", "--ttl", "30s")...); r.Code != exitOK {
			t.Fatalf("renew: %v", r)
		}
		if r := leases(t, commandLine(store, "release", "jobs/a", "--holder", "alice", "--epoch", "1")...); r.Code != exitOK {
			t.Fatalf("release: %v", r)
		}
		if r := leases(t, commandLine(store, "holders", "jobs/a")...); !strings.Contains(r.Stdout, "free") {
			t.Fatalf("holders after the release: %v", r)
		}
		if r := leases(t, commandLine(store, "acquire", "jobs/a", "--holder", "bob", "--ttl", "1s", "--json")...); !strings.Contains(r.Stdout, `"epoch":2`) {
			t.Fatalf("acquire after the release: %v; want epoch 2", r)
		}
	})

	// Issue 23's message for a TTL that etcd rounds up.
	t.Run("a TTL below etcd's minimum", func(t *testing.T) {
		r := leases(t, commandLine(store(t), "acquire", "short", "--holder", "h", "--ttl", "500ms")...)
		want := regexp.MustCompile(`^leases: acquire: warning: the lease lives 1s, not --ttl 500ms: etcd's leases are whole seconds, and never shorter than its minimum`)
		if line := strings.TrimSuffix(r.Stderr, "\n"); r.Code != exitOK || strings.Contains(line, "\n") || !want.MatchString(line) {
			t.Fatalf("%v; want exit 0 and one line matching %q", r, want)
		}
	})

	t.Run("run", func(t *testing.T) { runPassesTheLease(t, store(t)) })
	t.Run("run stopped when its lease is released", func(t *testing.T) { runStoppedWhenReleased(t, store(t)) })
	t.Run("two runs exclude each other", func(t *testing.T) { runsExcludeEachOther(t, store(t)...) })
	t.Run("run with leases stopped", func(t *testing.T) { runWithLeasesStopped(t, store(t), pausedStops...) })
}
