package main

import (
	"encoding/json"
	"testing"

	"leases/testkit/commandtest"
)

// run gives CMD the lease (resource, holder, epoch) in its environment,
// exits with CMD's own status when CMD ran to its end under the lease,
// and releases the lease when CMD has ended.
func TestRunPassesTheLeaseAndCMDsStatus(t *testing.T) {
	for _, status := range []string{"0", "7"} {
		t.Run("CMD exits "+status, func(t *testing.T) {
			store := "--sqlite=" + sqliteFile(t)
			for _, epoch := range []string{"1", "2"} { // so that run's epoch is 3
				if r := invoke(t, nil, "acquire", "jobs/r", store, "--holder", "x", "--ttl", "1h"); r.Code != exitOK {
					t.Fatal(r)
				}
				if r := invoke(t, nil, "release", "jobs/r", store, "--holder", "x", "--epoch", epoch); r.Code != exitOK {
					t.Fatal(r)
				}
			}
			r := start(t, append([]string{"run", "jobs/r", store, "--holder", "runner", "--"}, commandtest.CMD(t, "env", status)...)...).Wait()
			if r.Code != map[string]int{"0": 0, "7": 7}[status] || r.Stderr != "" ||
				r.Stdout != "LEASES_RESOURCE=jobs/r LEASES_HOLDER=runner LEASES_EPOCH=3\n" {
				t.Fatalf("run: %v; want CMD's status %s and the lease at epoch 3 in its environment", r, status)
			}
			var after holdersJSON
			if h := invoke(t, nil, "holders", "jobs/r", store, "--json"); json.Unmarshal([]byte(h.Stdout), &after) != nil ||
				len(after.Leases) != 0 || len(after.Free) != 1 {
				t.Fatalf("holders after run: %v; want jobs/r free: released when CMD ended", h)
			}
		})
	}
}
