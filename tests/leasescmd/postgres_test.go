package leasescmd_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"leases/postgres/pgtest"
)

// The command on PostgreSQL (a server of the test's own, started by
// package leases/postgres/pgtest, which skips where PostgreSQL 15 is not
// installed): the explicit operations and their refusals, on the
// server's clock; holders of a database without the tables; run's epoch
// and release; run stopped when its lease is released; two runs that
// exclude each other (the waiter reads the row until it changes).
func TestOnPostgres(t *testing.T) {
	server := pgtest.New(t)
	var tables atomic.Int64
	store := func() []string {
		return []string{"--postgres", server.DSN("postgres"), "--prefix", fmt.Sprintf("t%d_", tables.Add(1))}
	}

	t.Run("no tables", func(t *testing.T) {
		if r := leases(t, commandLine(store(), "holders")...); r.Code != exitUsage ||
			!strings.Contains(r.Stderr, "no table t") || !strings.Contains(r.Stderr, "authority in this database (only acquire and run create it)") {
			t.Fatalf("holders before any acquire: %v; want exit 2, no table", r)
		}
	})

	t.Run("explicit operations", func(t *testing.T) {
		store := store()
		var a leaseJSON
		r := leases(t, commandLine(store, "acquire", "jobs/a", "--holder", "alice", "--ttl", "30s", "--json")...)
		if r.Code != exitOK || json.Unmarshal([]byte(r.Stdout), &a) != nil || a.Epoch != 1 || *a.ExpiresInMs != 30_000 ||
			a.Clock != "the PostgreSQL server's clock" {
			t.Fatalf("acquire: %v; want epoch 1 for 30s on the server's clock", r)
		}
		if r := leases(t, commandLine(store, "acquire", "jobs/a", "--holder", "bob", "--ttl", "30s")...); r.Code != exitRefused ||
			!strings.Contains(r.Stderr, `"jobs/a" is held by "alice" at epoch 1 for `) {
			t.Fatalf("acquire of a held lease: %v", r)
		}
		var listed holdersJSON
		if r := leases(t, commandLine(store, "holders", "--json")...); json.Unmarshal([]byte(r.Stdout), &listed) != nil ||
			listed.Store != "postgres" || listed.AtTheLatest || listed.Now == "" || len(listed.Leases) != 1 ||
			listed.Leases[0].Holder != "alice" || *listed.Leases[0].ExpiresInMs > 30_000 || *listed.Leases[0].ExpiresInMs <= 0 {
			t.Fatalf("holders: %v; want alice's lease, its time left on the server's clock", r)
		}
		for _, refused := range [][]string{
			{"renew", "jobs/a", "--holder", "alice", "--epoch", "2", "--ttl", "30s"},
			{"release", "jobs/a", "--holder", "bob", "--epoch", "1"},
		} {
			if r := leases(t, commandLine(store, refused[0], refused[1:]...)...); r.Code != exitRefused || !strings.Contains(r.Stderr, "not the lease holder") {
				t.Fatalf("%q: %v; want refused", refused, r)
			}
		}
		// The time left after a renewal is the server's to say: renew
		// prints the expiry alone.
		if r := leases(t, commandLine(store, "renew", "jobs/a", "--holder", "alice", "--epoch", "1", "--ttl", "1m")...); r.Code != exitOK ||
			!strings.HasPrefix(r.Stdout, "renewed jobs/a for alice: epoch 1, expires at ") || !strings.HasSuffix(r.Stdout, "(the PostgreSQL server's clock)\n") {
			t.Fatalf("renew: %v", r)
		}
		if r := leases(t, commandLine(store, "release", "jobs/a", "--holder", "alice", "--epoch", "1")...); r.Code != exitOK {
			t.Fatalf("release: %v", r)
		}
		if r := leases(t, commandLine(store, "holders", "jobs/a")...); !strings.Contains(r.Stdout, "free") ||
			!strings.Contains(r.Stdout, "times: the PostgreSQL server's clock") {
			t.Fatalf("holders after the release: %v", r)
		}
		if r := leases(t, commandLine(store, "acquire", "jobs/a", "--holder", "bob", "--ttl", "1s", "--json")...); !strings.Contains(r.Stdout, `"epoch":2`) {
			t.Fatalf("acquire after the release: %v; want epoch 2", r)
		}
	})

	t.Run("run", func(t *testing.T) { runPassesTheLease(t, store()) })
	t.Run("run stopped when its lease is released", func(t *testing.T) { runStoppedWhenReleased(t, store()) })
	t.Run("two runs exclude each other", func(t *testing.T) { runsExcludeEachOther(t, store()...) })
	t.Run("run with leases stopped", func(t *testing.T) { runWithLeasesStopped(t, store(), pausedStops...) })
}
