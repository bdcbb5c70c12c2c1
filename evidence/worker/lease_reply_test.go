package worker

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"leases"
)

// The lease that a call with an unknown outcome would have granted crosses
// the pipe with the error, for the controller may now be its holder; a
// refusal or a failure before commit carries none.
func TestWouldBeLeaseCrossesThePipe(t *testing.T) {
	granted := leases.Lease{Resource: "r", Holder: "A", Epoch: 2, GrantedAt: 5, ExpiresAt: 8}
	cases := []struct {
		name string
		err  error
		want leases.Lease
	}{
		{"unknown outcome", fmt.Errorf("acquire: %w: commit failed", leases.ErrOutcomeUnknown), granted},
		{"failure before commit", errors.New("acquire: cancelled before commit, nothing changed"), leases.Lease{}},
		{"refusal", fmt.Errorf("acquire: %w", leases.ErrNotHolder), leases.Lease{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			line, err := json.Marshal(leaseReply(&granted, tc.err))
			if err != nil {
				t.Fatal(err)
			}
			var got reply
			if err := json.Unmarshal(line, &got); err != nil {
				t.Fatal(err)
			}
			remote := fmt.Errorf("worker A: %w", remoteError{msg: got.Error, sentinels: got.Sentinels})
			if lease := wouldBe(got, remote); lease != tc.want {
				t.Fatalf("the controller got %+v, want %+v (reply %s)", lease, tc.want, line)
			}
			if !errors.Is(remote, leases.ErrOutcomeUnknown) != (tc.want == leases.Lease{}) {
				t.Fatalf("errors.Is(ErrOutcomeUnknown) = %v on the controller's side", !errors.Is(remote, leases.ErrOutcomeUnknown))
			}
		})
	}
}
