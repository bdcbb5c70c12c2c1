package etcdstore_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"leases"
	"leases/etcd"
)

// A lease that is not one the Lessor could have granted (epoch 0, no
// resource, no holder) is invalid input to a renewal and to a release,
// told before anything is sent: not a decision on what etcd holds (not
// the holder, ran out), and the lease that is held goes on.
func TestLessorRefusesAnInvalidLeaseAsInvalidInput(t *testing.T) {
	ctx := testContext(t)
	c := client(t)
	lessor := etcd.New(c, options(t)).Lessor()
	held, err := lessor.Acquire(ctx, "r", "A", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	before := keysUnder(t, c)
	for name, change := range map[string]func(*leases.Lease){
		"epoch 0":     func(l *leases.Lease) { l.Epoch = 0 },
		"no resource": func(l *leases.Lease) { l.Resource = "" },
		"no holder":   func(l *leases.Lease) { l.Holder = "" },
	} {
		invalid := held
		change(&invalid)
		_, renewErr := lessor.Renew(ctx, invalid, time.Hour)
		for call, err := range map[string]error{"renew": renewErr, "release": lessor.Release(ctx, invalid)} {
			if !errors.Is(err, leases.ErrInvalidInput) || errors.Is(err, leases.ErrNotHolder) || errors.Is(err, leases.ErrLeaseExpired) {
				t.Errorf("%s a lease of %s: %v; want invalid input", call, name, err)
			}
		}
	}
	if after := keysUnder(t, c); after != before {
		t.Fatalf("the keys changed:\n%s\nbecame\n%s", before, after)
	}
	if _, err := lessor.Renew(ctx, held, time.Hour); err != nil {
		t.Fatalf("the held lease after the invalid calls: %v", err)
	}
}

// A lease in its last second, of which etcd says that no whole second is
// left (a time to live of 0), is live: the listing shows it, as long as
// etcd has not ended it. Told between two reads of its time to live that
// both find it not yet ended; where the lease ended in between, the test
// tries again with another.
func TestLessorListsALeaseInItsLastSecond(t *testing.T) {
	ctx := testContext(t)
	c := client(t)
	lessor := etcd.New(c, options(t)).Lessor()
	for try := 0; ; try++ {
		resource := fmt.Sprintf("r%d", try)
		if _, err := lessor.Acquire(ctx, resource, "A", time.Second); err != nil {
			t.Fatal(err)
		}
		id := heldLeaseID(t, c, resource)
		for timeToLive(t, c, id) > 0 { // etcd's leader counts the time
		}
		live, _, err := lessor.Live(ctx, resource)
		if err != nil {
			t.Fatal(err)
		}
		if left := timeToLive(t, c, id); left < 0 {
			t.Logf("the lease of %s ended during the listing: try again", resource)
			continue
		}
		if len(live) != 1 || live[0].Resource != resource {
			t.Fatalf("the listing of %s in its last second: %+v; want its lease", resource, live)
		}
		return
	}
}

// heldLeaseID is the etcd lease of resource's holder key, under the
// test's prefix.
func heldLeaseID(t *testing.T, c *clientv3.Client, resource string) clientv3.LeaseID {
	t.Helper()
	resp, err := c.Get(testContext(t), prefix(t)+"held/"+resource)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("the holder key of %s: %v, %v", resource, resp, err)
	}
	var record struct {
		Lease int64 `json:"lease"`
	}
	if err := json.Unmarshal(resp.Kvs[0].Value, &record); err != nil {
		t.Fatal(err)
	}
	return clientv3.LeaseID(record.Lease)
}

// timeToLive is the whole seconds etcd says are left of the etcd lease
// id; -1 once it has ended.
func timeToLive(t *testing.T, c *clientv3.Client, id clientv3.LeaseID) int64 {
	t.Helper()
	resp, err := c.TimeToLive(testContext(t), id)
	if err != nil {
		t.Fatal(err)
	}
	return resp.TTL
}

// A record the Lessor cannot decode (an epoch key that holds no epoch, a
// holder key that holds no holder: written by hand, or by another
// program under the prefix) is an error of every call that reads it,
// neither a grant nor a refusal, and it is never overwritten: a grant
// over an unreadable epoch could go back to epoch 1. ("0" is an epoch:
// the one a release writes to stop a late first grant.)
func TestLessorNeverOverwritesAnUndecodableRecord(t *testing.T) {
	cases := []struct{ kind, value string }{
		{"epochs/", "x"},
		{"epochs/", ""},
		{"epochs/", "-3"},
		{"held/", "{"},
		{"held/", `"A"`},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s%q", tc.kind, tc.value), func(t *testing.T) {
			ctx := testContext(t)
			c := client(t)
			if _, err := c.Put(ctx, prefix(t)+tc.kind+"r", tc.value); err != nil {
				t.Fatal(err)
			}
			before := keysUnder(t, c)
			lessor := etcd.New(c, options(t)).Lessor()
			if tc.kind == "held/" {
				// Read first: an acquire that took the holder key for
				// one that ran out would decide again until its bound.
				if lease, live, err := lessor.Lease(ctx, "r"); err == nil {
					t.Fatalf("Lease of an undecodable holder key: %+v (live %v), no error", lease, live)
				}
				if live, _, err := lessor.Live(ctx); err == nil {
					t.Fatalf("Live over an undecodable holder key: %+v, no error", live)
				}
			}
			lease, err := lessor.Acquire(ctx, "r", "A", time.Hour)
			if err == nil || leases.IsRefusal(err) || errors.Is(err, leases.ErrOutcomeUnknown) {
				t.Errorf("acquire over an undecodable record: %+v, %v; want a failure", lease, err)
			}
			if after := keysUnder(t, c); after != before {
				t.Fatalf("the keys changed:\n%s\nbecame\n%s", before, after)
			}
		})
	}
}

// keysUnder renders every key under the test's prefix with its value and
// the revision that last wrote it: a rewrite of the same value shows too.
func keysUnder(t *testing.T, c *clientv3.Client) string {
	t.Helper()
	resp, err := c.Get(testContext(t), prefix(t), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for _, kv := range resp.Kvs {
		fmt.Fprintf(&out, "%s @%d %s\n", strings.TrimPrefix(string(kv.Key), prefix(t)), kv.ModRevision, kv.Value)
	}
	return out.String()
}
