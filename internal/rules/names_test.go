package rules

import (
	"errors"
	"strings"
	"testing"

	"leases"
)

// The name rule: what it refuses, each with a message of one line that
// shows the name escaped, and what it keeps accepting.
func TestCheckName(t *testing.T) {
	for _, tc := range []struct {
		name string
		// want is a part of the message; empty: the name is valid.
		want string
	}{
		{"jobs/invoice-42", ""},
		{"worker a", ""},
		{" padded ", ""},
		{"Ünïcödé 資源 🚀", ""},
		{`r'); DROP TABLE authority_leases; --`, ""},
		{strings.Repeat("n", leases.MaxNameBytes), ""},
		{"", "resource is empty"},
		{strings.Repeat("n", leases.MaxNameBytes+1), "resource is 257 bytes, more than 256"},
		{"r\xff", "not valid UTF-8"},
		{"r\x00", "NUL byte"},
		{" ", `resource " " is only white space`},
		{"\u00a0\u3000", `is only white space`},
		{"a\tb", `resource "a\tb" has the control character U+0009 at byte 1`},
		{"a\nb", `has the control character U+000A at byte 1`},
		{"\r", `only white space`},
		{"a\x1b[31mred", `has the control character U+001B at byte 1`},
		{"del\x7f", `U+007F at byte 3`},
		{"c1\u0085", `U+0085 at byte 2`},
		{"ls\u2028", `U+2028 at byte 2`},
		{"ps\u2029", `U+2029 at byte 2`},
	} {
		err := CheckName("resource", tc.name)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: %v; want it valid", tc.name, err)
		case tc.want == "":
		case !errors.Is(err, leases.ErrInvalidInput) || !strings.Contains(err.Error(), tc.want) || strings.ContainsAny(err.Error(), "\n\t"):
			t.Errorf("%q: %v; want ErrInvalidInput, one line, saying %q", tc.name, err, tc.want)
		}
	}
}

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
