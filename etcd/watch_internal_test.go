package etcd

import (
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A waiter wakes on a change and on a watch that broke, never on a
// progress notification: one that woke on every response would spin, and
// one that slept through a broken watch would wait for the expiry.
func TestWhatWakesAWaiter(t *testing.T) {
	change := &clientv3.Event{Type: mvccpb.DELETE, Kv: &mvccpb.KeyValue{Key: []byte("/leases/held/r")}}
	for _, tc := range []struct {
		name string
		resp clientv3.WatchResponse
		want bool
	}{
		{"a change", clientv3.WatchResponse{Events: []*clientv3.Event{change}}, true},
		{"two changes", clientv3.WatchResponse{Events: []*clientv3.Event{change, change}}, true},
		{"a progress notification", clientv3.WatchResponse{}, false},
		{"a cancelled watch", clientv3.WatchResponse{Canceled: true}, true},
		{"a compacted revision", clientv3.WatchResponse{CompactRevision: 7}, true},
	} {
		if got := wakes(tc.resp); got != tc.want {
			t.Errorf("%s: wakes %v; want %v", tc.name, got, tc.want)
		}
	}
}
