package etcd

import (
	"context"
	"errors"
	"testing"
)

// A read names ErrNoLeader only when members refused it for want of a
// leader and then its call ended: the refusals are what it met. A read
// cut off that no member refused, and a failure of a call still under
// way, are what they are, and say so.
func TestAReadCutOffAfterRefusalsIsNoLeader(t *testing.T) {
	live := context.Background()
	ended, cancel := context.WithCancel(live)
	cancel()
	cutOff := errors.New("the last try was cut off")
	for _, tc := range []struct {
		name     string
		refused  int
		ctx      context.Context
		noLeader bool
	}{
		{"refused, then cut off", 1, ended, true},
		{"refused often, then cut off", 5, ended, true},
		{"cut off, never refused", 0, ended, false},
		{"refused, then failed while the call goes on", 1, live, false},
		{"failed, never refused", 0, live, false},
	} {
		r := retries{refused: tc.refused}
		err := r.cut(tc.ctx, cutOff)
		if errors.Is(err, ErrNoLeader) != tc.noLeader || !errors.Is(err, cutOff) {
			t.Errorf("%s: %v; want ErrNoLeader %v, and the try's own error", tc.name, err, tc.noLeader)
		}
	}
	// A refusal met once the call has ended ends it at once, as no
	// leader: nothing more is sent (the client is never asked).
	var r retries
	if err := r.wait(ended, nil); !errors.Is(err, ErrNoLeader) {
		t.Errorf("wait once the call has ended: %v; want ErrNoLeader", err)
	}
}
