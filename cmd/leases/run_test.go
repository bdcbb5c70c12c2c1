package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// run gives CMD the lease (resource, holder, epoch) in its environment,
// exits with CMD's own status when CMD ran to its end under the lease,
// and releases the lease when CMD has ended.
func TestRunPassesTheLeaseAndCMDsStatus(t *testing.T) {
	for _, status := range []string{"0", "7"} {
		t.Run("CMD exits "+status, func(t *testing.T) {
			store := "--sqlite=" + sqliteFile(t)
			for _, epoch := range []string{"1", "2"} { // so that run's epoch is 3
				if r := invoke(t, nil, "acquire", "jobs/r", store, "--holder", "x", "--ttl", "1h"); r.code != exitOK {
					t.Fatal(r)
				}
				if r := invoke(t, nil, "release", "jobs/r", store, "--holder", "x", "--epoch", epoch); r.code != exitOK {
					t.Fatal(r)
				}
			}
			r := start(t, append([]string{"run", "jobs/r", store, "--holder", "runner", "--"}, cmd(t, "env", status)...)...).wait()
			if r.code != map[string]int{"0": 0, "7": 7}[status] || r.stderr != "" ||
				r.stdout != "LEASES_RESOURCE=jobs/r LEASES_HOLDER=runner LEASES_EPOCH=3\n" {
				t.Fatalf("run: %v; want CMD's status %s and the lease at epoch 3 in its environment", r, status)
			}
			var after holdersJSON
			if h := invoke(t, nil, "holders", "jobs/r", store, "--json"); json.Unmarshal([]byte(h.stdout), &after) != nil ||
				len(after.Leases) != 0 || len(after.Free) != 1 {
				t.Fatalf("holders after run: %v; want jobs/r free: released when CMD ended", h)
			}
		})
	}
}

// Two runs on one resource exclude each other: the second, with --wait,
// says it waits and starts its CMD only after the first CMD has ended
// and its lease was released, with the next epoch; a run without --wait
// is refused meanwhile. The CMDs log their start and end to one file.
func TestRunsOnOneResourceExcludeEachOther(t *testing.T) {
	runsExcludeEachOther(t, "--sqlite="+sqliteFile(t))
}

// runsExcludeEachOther is TestRunsOnOneResourceExcludeEachOther on the
// store that store names.
func runsExcludeEachOther(t *testing.T, store ...string) {
	log := filepath.Join(t.TempDir(), "log")
	hold := func(holder string) *process {
		args := append(append([]string{"run", "r", "--holder", holder, "--wait"}, store...), "--")
		return start(t, append(args, cmd(t, "hold", log)...)...)
	}
	a := hold("A")
	a.expect(a.stdout, "started 1")
	b := hold("B")
	b.expect(b.stderr, "r is held by A at epoch 1 for ")
	if r := invoke(t, nil, append(append([]string{"run", "r", "--holder", "C"}, store...), "--", cmd(t, "env")[0])...); r.code != exitRefused {
		t.Fatalf("a run without --wait while A holds the lease: %v; want refused", r)
	}
	if err := a.stdin.Close(); err != nil { // A's CMD ends
		t.Fatal(err)
	}
	if r := a.wait(); r.code != exitOK || r.stdout != "started 1\ndone 1\n" || r.stderr != "" {
		t.Fatalf("A: %v", r)
	}
	b.expect(b.stdout, "started 2")
	if err := b.stdin.Close(); err != nil {
		t.Fatal(err)
	}
	if r := b.wait(); r.code != exitOK || r.stdout != "started 2\ndone 2\n" {
		t.Fatalf("B: %v", r)
	}
	got, err := os.ReadFile(log)
	if err != nil || string(got) != "start 1\nend 1\nstart 2\nend 2\n" {
		t.Fatalf("the CMDs' log: %q, %v; want A's tenure whole before B's", got, err)
	}
}

// commandLine is a command line: the command, the store's flags, the rest.
func commandLine(store []string, command string, args ...string) []string {
	return append(append([]string{command}, store...), args...)
}

// runPassesTheLease: run on the store gives CMD the lease, exits with
// CMD's status and releases the lease.
func runPassesTheLease(t *testing.T, store []string) {
	r := start(t, append(commandLine(store, "run", "jobs/r", "--holder", "runner", "--ttl", "5s", "--"), cmd(t, "env", "5")...)...).wait()
	if r.code != 5 || r.stdout != "LEASES_RESOURCE=jobs/r LEASES_HOLDER=runner LEASES_EPOCH=1\n" {
		t.Fatalf("run: %v; want CMD's status 5 and epoch 1", r)
	}
	if r := invoke(t, nil, commandLine(store, "holders", "jobs/r")...); !strings.Contains(r.stdout, "free") {
		t.Fatalf("holders after run: %v; want jobs/r released", r)
	}
}

// runStoppedWhenReleased: an operator's release of run's lease on the
// store stops CMD, and run exits 4.
func runStoppedWhenReleased(t *testing.T, store []string) {
	p := start(t, append(commandLine(store, "run", "jobs/s", "--holder", "h", "--ttl", "3s", "--"), cmd(t, "hold")...)...)
	p.expect(p.stdout, "started 1")
	if r := invoke(t, nil, commandLine(store, "release", "jobs/s", "--holder", "h", "--epoch", "1")...); r.code != exitOK {
		t.Fatalf("release: %v", r)
	}
	if r := p.wait(); r.code != exitLost || !strings.Contains(r.stderr, "the lease on jobs/s at epoch 1 ended before CMD did") {
		t.Fatalf("run: %v; want exit 4", r)
	}
}
