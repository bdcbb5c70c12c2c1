package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"leases"
	"leases/postgres"
	"leases/testkit/fencetest"
)

// Many holders, each on a connection of its own (as many processes),
// acquire, renew and release two resources at once, their ticks drawn
// from one counter, under READ COMMITTED and under SERIALIZABLE. What
// they were told adds up: per resource, the epochs granted are 1, 2, 3 ...
// without a gap or a repeat, each granted no earlier than the previous
// one's end (its last renewal's expiry, or its release), and the row
// holds the last. No outcome is unknown; under READ COMMITTED nothing
// fails, under SERIALIZABLE a decision that lost every one of its tries
// fails before commit (counted); with no tries again (Retries < 0) the
// serialization failures reach the callers, which shows that the load
// makes them.
func TestConcurrentHolders(t *testing.T) {
	for _, c := range []struct {
		isolation sql.IsolationLevel
		retries   int
	}{{sql.LevelReadCommitted, 0}, {sql.LevelSerializable, 0}, {sql.LevelSerializable, -1}} {
		isolation := c.isolation
		t.Run(fmt.Sprintf("%v, retries %d", isolation, c.retries), func(t *testing.T) {
			ctx := fencetest.Context(t)
			shared := database(t, 0).DB
			store := newStore(t, shared, postgres.Options{})
			const holders, rounds = 8, 30
			resources := []string{"r0", "r1"}
			var clock atomic.Int64
			var mu sync.Mutex
			grants := map[string][]leases.Lease{} // by resource
			ends := map[string]map[int64]int64{}  // by resource, by epoch
			for _, r := range resources {
				ends[r] = map[int64]int64{}
			}
			ended := func(l leases.Lease, end int64) {
				mu.Lock()
				defer mu.Unlock()
				ends[l.Resource][l.Epoch] = end
			}
			var failed, refused atomic.Int64
			var wg sync.WaitGroup
			for h := range holders {
				a := sameStore(t, store, database(t, 1).DB, postgres.Options{Isolation: isolation, Retries: c.retries}).Authority()
				holder := fmt.Sprintf("h%d", h)
				wg.Go(func() {
					for i := range rounds {
						resource := resources[(h+i)%len(resources)]
						lease, err := a.Acquire(ctx, resource, holder, clock.Add(1), 4)
						if !check(t, err, &refused, &failed) {
							continue
						}
						mu.Lock()
						grants[resource] = append(grants[resource], lease)
						mu.Unlock()
						ended(lease, lease.ExpiresAt)
						if renewed, err := a.Renew(ctx, lease, clock.Add(1), 4); check(t, err, &refused, &failed) {
							lease = renewed
							ended(lease, lease.ExpiresAt)
						}
						if i%2 == 0 {
							now := clock.Add(1)
							if err := a.Release(ctx, lease, now); check(t, err, &refused, &failed) {
								ended(lease, now)
							}
						}
					}
				})
			}
			wg.Wait()
			t.Logf("%d refusals, %d failures before commit", refused.Load(), failed.Load())
			if isolation == sql.LevelReadCommitted && failed.Load() > 0 {
				t.Errorf("%d decisions failed under READ COMMITTED; none should", failed.Load())
			}
			if c.retries < 0 && failed.Load() == 0 {
				t.Error("no serialization failure without retries: the load does not contend")
			}
			for _, r := range resources {
				got := grants[r]
				slices.SortFunc(got, func(a, b leases.Lease) int { return int(a.Epoch - b.Epoch) })
				if len(got) == 0 {
					t.Fatalf("%s: nothing granted", r)
				}
				for i, l := range got {
					if l.Epoch != int64(i+1) {
						t.Fatalf("%s: grant %d has epoch %d: %+v", r, i+1, l.Epoch, got[max(0, i-2):i+1])
					}
					if i > 0 && l.GrantedAt < ends[r][got[i-1].Epoch] {
						t.Fatalf("%s: %+v granted at %d, while epoch %d was live until %d", r, l, l.GrantedAt, got[i-1].Epoch, ends[r][got[i-1].Epoch])
					}
				}
				if holder, _, err := store.Authority().Lease(ctx, r, clock.Load()); err != nil {
					t.Fatal(err)
				} else if last := got[len(got)-1]; holder.Epoch != 0 && holder.Epoch != last.Epoch {
					t.Fatalf("%s: the row's live lease %+v is not the last granted %+v", r, holder, last)
				}
			}
		})
	}
}

// check sorts a call's error: nil (true), a refusal or a failure before
// commit (counted; false). An unknown outcome fails the test.
func check(t *testing.T, err error, refused, failed *atomic.Int64) bool {
	switch {
	case err == nil:
		return true
	case errors.Is(err, leases.ErrOutcomeUnknown):
		t.Errorf("an unknown outcome: %v", err)
	case leases.IsRefusal(err):
		refused.Add(1)
	case postgres.IsSerializationFailure(err):
		failed.Add(1)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		t.Errorf("%v", err)
	default:
		t.Errorf("an unexpected failure: %v", err)
	}
	return false
}
