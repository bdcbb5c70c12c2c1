package rules

import (
	"errors"
	"testing"

	"leases"
)

// A renewal or release that names another tenure than the row's says
// whose the row's is and whose was asked for, each holder by name, for a
// live, an expired and a released row; never one holder's name beside
// the other's epoch.
func TestNotHolderNamesBothTenures(t *testing.T) {
	live := LeaseRow{Epoch: 1, Holder: "worker-a", Held: true, GrantedAt: 0, ExpiresAt: 100, LastTick: 0}
	released := LeaseRow{Epoch: 2, LastTick: 50, ExpiresAt: 50}
	for _, tc := range []struct {
		name string
		row  LeaseRow
		held leases.Lease
		now  int64
		want string
	}{
		{"another holder at the same epoch", live, leases.Lease{Resource: "r", Holder: "worker-b", Epoch: 1}, 10,
			`not the lease holder: "r" is held by "worker-a" at epoch 1, not by "worker-b" at epoch 1`},
		{"another epoch", live, leases.Lease{Resource: "r", Holder: "worker-a", Epoch: 3}, 10,
			`not the lease holder: "r" is held by "worker-a" at epoch 1, not by "worker-a" at epoch 3`},
		{"another holder of an expired lease", live, leases.Lease{Resource: "r", Holder: "worker-b", Epoch: 1}, 100,
			`not the lease holder: "r" was held by "worker-a" at epoch 1 until tick 100, not by "worker-b" at epoch 1`},
		{"an older epoch of a released lease", released, leases.Lease{Resource: "r", Holder: "worker-b", Epoch: 1}, 60,
			`not the lease holder: "r" is free (epoch 2 was released), not held by "worker-b" at epoch 1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Renew(tc.row, true, tc.held, tc.now, 10)
			if !errors.Is(err, leases.ErrNotHolder) || err.Error() != tc.want {
				t.Fatalf("renew: %v; want %q", err, tc.want)
			}
			if _, err := Release(tc.row, true, tc.held, tc.now); err == nil || err.Error() != tc.want {
				t.Fatalf("release: %v; want %q", err, tc.want)
			}
		})
	}
}
