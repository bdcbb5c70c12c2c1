package leasescmd_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"leases/testkit/commandtest"
)

// The checks of run that every store passes, each on the store that
// store names: on SQLite here, on PostgreSQL in TestOnPostgres, on etcd
// in TestOnEtcd.
func TestOnSQLite(t *testing.T) {
	store := func(t *testing.T) []string { return []string{"--sqlite", filepath.Join(t.TempDir(), "leases.db")} }
	t.Run("run", func(t *testing.T) { runPassesTheLease(t, store(t)) })
	t.Run("run stopped when its lease is released", func(t *testing.T) { runStoppedWhenReleased(t, store(t)) })
	t.Run("two runs exclude each other", func(t *testing.T) { runsExcludeEachOther(t, store(t)...) })
	t.Run("run with leases stopped", func(t *testing.T) { runWithLeasesStopped(t, store(t), pausedStops...) })
}

// runPassesTheLease: run on the store gives CMD the lease, exits with
// CMD's status and releases the lease.
func runPassesTheLease(t *testing.T, store []string) {
	r := start(t, append(commandLine(store, "run", "jobs/r", "--holder", "runner", "--ttl", "5s", "--"), commandtest.CMD(t, "env", "5")...)...).Wait()
	if r.Code != 5 || r.Stdout != "LEASES_RESOURCE=jobs/r LEASES_HOLDER=runner LEASES_EPOCH=1\n" {
		t.Fatalf("run: %v; want CMD's status 5 and epoch 1", r)
	}
	if r := leases(t, commandLine(store, "holders", "jobs/r")...); !strings.Contains(r.Stdout, "free") {
		t.Fatalf("holders after run: %v; want jobs/r released", r)
	}
}

// runStoppedWhenReleased: an operator's release of run's lease on the
// store stops CMD, and run exits 4.
func runStoppedWhenReleased(t *testing.T, store []string) {
	p := start(t, append(commandLine(store, "run", "jobs/s", "--holder", "h", "--ttl", "3s", "--"), commandtest.CMD(t, "hold")...)...)
	p.Expect(p.Stdout, "started 1")
	if r := leases(t, commandLine(store, "release", "jobs/s", "--holder", "h", "--epoch", "1")...); r.Code != exitOK {
		t.Fatalf("release: %v", r)
	}
	if r := p.Wait(); r.Code != exitLost || !strings.Contains(r.Stderr, "the lease on jobs/s at epoch 1 ended before CMD did") {
		t.Fatalf("run: %v; want exit 4", r)
	}
}

// runsExcludeEachOther: two runs on one resource exclude each other: the
// second, with --wait, says it waits and starts its CMD only after the
// first CMD has ended and its lease was released, with the next epoch; a
// run without --wait is refused meanwhile. The CMDs log their start and
// end to one file.
func runsExcludeEachOther(t *testing.T, store ...string) {
	log := filepath.Join(t.TempDir(), "log")
	hold := func(holder string) *commandtest.Process {
		args := append(append([]string{"run", "r", "--holder", holder, "--wait"}, store...), "--")
		return start(t, append(args, commandtest.CMD(t, "hold", log)...)...)
	}
	a := hold("A")
	a.Expect(a.Stdout, "started 1")
	b := hold("B")
	b.Expect(b.Stderr, "r is held by A at epoch 1 for ")
	if r := leases(t, append(append([]string{"run", "r", "--holder", "C"}, store...), "--", commandtest.CMD(t, "env")[0])...); r.Code != exitRefused {
		t.Fatalf("a run without --wait while A holds the lease: %v; want refused", r)
	}
	if err := a.Stdin.Close(); err != nil { // A's CMD ends
		t.Fatal(err)
	}
	if r := a.Wait(); r.Code != exitOK || r.Stdout != "started 1\ndone 1\n" || r.Stderr != "" {
		t.Fatalf("A: %v", r)
	}
	b.Expect(b.Stdout, "started 2")
	if err := b.Stdin.Close(); err != nil {
		t.Fatal(err)
	}
	if r := b.Wait(); r.Code != exitOK || r.Stdout != "started 2\ndone 2\n" {
		t.Fatalf("B: %v", r)
	}
	got, err := os.ReadFile(log)
	if err != nil || string(got) != "start 1\nend 1\nstart 2\nend 2\n" {
		t.Fatalf("the CMDs' log: %q, %v; want A's tenure whole before B's", got, err)
	}
}
