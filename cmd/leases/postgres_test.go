package main

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
		if r := invoke(t, nil, commandLine(store(), "holders")...); r.code != exitUsage ||
			!strings.Contains(r.stderr, "no table t") || !strings.Contains(r.stderr, "authority in this database (only acquire and run create it)") {
			t.Fatalf("holders before any acquire: %v; want exit 2, no table", r)
		}
	})

	t.Run("explicit operations", func(t *testing.T) {
		store := store()
		var a leaseJSON
		r := invoke(t, nil, commandLine(store, "acquire", "jobs/a", "--holder", "alice", "--ttl", "30s", "--json")...)
		if r.code != exitOK || json.Unmarshal([]byte(r.stdout), &a) != nil || a.Epoch != 1 || *a.ExpiresInMs != 30_000 ||
			a.Clock != "the PostgreSQL server's clock" {
			t.Fatalf("acquire: %v; want epoch 1 for 30s on the server's clock", r)
		}
		if r := invoke(t, nil, commandLine(store, "acquire", "jobs/a", "--holder", "bob", "--ttl", "30s")...); r.code != exitRefused ||
			!strings.Contains(r.stderr, `"jobs/a" is held by "alice" at epoch 1 for `) {
			t.Fatalf("acquire of a held lease: %v", r)
		}
		var listed holdersJSON
		if r := invoke(t, nil, commandLine(store, "holders", "--json")...); json.Unmarshal([]byte(r.stdout), &listed) != nil ||
			listed.Store != "postgres" || listed.AtTheLatest || listed.Now == "" || len(listed.Leases) != 1 ||
			listed.Leases[0].Holder != "alice" || *listed.Leases[0].ExpiresInMs > 30_000 || *listed.Leases[0].ExpiresInMs <= 0 {
			t.Fatalf("holders: %v; want alice's lease, its time left on the server's clock", r)
		}
		for _, refused := range [][]string{
			{"renew", "jobs/a", "--holder", "alice", "--epoch", "2", "--ttl", "30s"},
			{"release", "jobs/a", "--holder", "bob", "--epoch", "1"},
		} {
			if r := invoke(t, nil, commandLine(store, refused[0], refused[1:]...)...); r.code != exitRefused || !strings.Contains(r.stderr, "not the lease holder") {
				t.Fatalf("%q: %v; want refused", refused, r)
			}
		}
		// The time left after a renewal is the server's to say: renew
		// prints the expiry alone.
		if r := invoke(t, nil, commandLine(store, "renew", "jobs/a", "--holder", "alice", "--epoch", "1", "--ttl", "1m")...); r.code != exitOK ||
			!strings.HasPrefix(r.stdout, "renewed jobs/a for alice: epoch 1, expires at ") || !strings.HasSuffix(r.stdout, "(the PostgreSQL server's clock)\n") {
			t.Fatalf("renew: %v", r)
		}
		if r := invoke(t, nil, commandLine(store, "release", "jobs/a", "--holder", "alice", "--epoch", "1")...); r.code != exitOK {
			t.Fatalf("release: %v", r)
		}
		if r := invoke(t, nil, commandLine(store, "holders", "jobs/a")...); !strings.Contains(r.stdout, "free") ||
			!strings.Contains(r.stdout, "times: the PostgreSQL server's clock") {
			t.Fatalf("holders after the release: %v", r)
		}
		if r := invoke(t, nil, commandLine(store, "acquire", "jobs/a", "--holder", "bob", "--ttl", "1s", "--json")...); !strings.Contains(r.stdout, `"epoch":2`) {
			t.Fatalf("acquire after the release: %v; want epoch 2", r)
		}
	})

	t.Run("run", func(t *testing.T) { runPassesTheLease(t, store()) })
	t.Run("run stopped when its lease is released", func(t *testing.T) { runStoppedWhenReleased(t, store()) })
	t.Run("two runs exclude each other", func(t *testing.T) { runsExcludeEachOther(t, store()...) })
}
