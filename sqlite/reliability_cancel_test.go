package sqlite_test

// Calls whose context ends at a random moment. Not among the contract's
// 17 tests.

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"leases"
	"leases/sqlite"
	"leases/testkit/sqlitetest"
)

// Acquires with random short deadlines, from two goroutines at once, each
// on a resource of its own and at a tick at which the last lease has
// expired, so that every call that reaches its commit is granted. Every
// error must say what happened: the context ended (errors.Is with the
// context's error) before the commit was sent, or during it
// (ErrOutcomeUnknown), after which the store refuses everything until it
// is reopened. Nothing is granted twice, and no epoch is skipped unless an
// unknown outcome may have consumed it.
func TestCancelledCallsSayWhy(t *testing.T) {
	path := sqlitetest.Path(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	type tally struct {
		granted              []int64
		cancelled, uncertain int
	}
	// Calls hold mu for reading; reopening the store holds it for writing.
	var mu sync.RWMutex
	store := sqlitetest.Open(t, path)
	reopen := func(failed *sqlite.Store) {
		mu.Lock()
		defer mu.Unlock()
		if store == failed {
			_ = store.Close()
			store = sqlitetest.Open(t, path)
		}
	}
	tallies := make([]tally, 2)
	var wg sync.WaitGroup
	for g := range tallies {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(g)))
			resource := []string{"r0", "r1"}[g]
			for tick := int64(0); tick < 300; tick++ {
				mu.RLock()
				s := store
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rng.IntN(400))*time.Microsecond)
				lease, err := s.Authority().Acquire(ctx, resource, "A", tick, 1)
				cancel()
				mu.RUnlock()
				tl := &tallies[g]
				switch {
				case err == nil:
					tl.granted = append(tl.granted, lease.Epoch)
				case errors.Is(err, sqlite.ErrReopenRequired):
					reopen(s) // the other goroutine's unknown outcome
				case errors.Is(err, leases.ErrOutcomeUnknown) && errors.Is(err, context.DeadlineExceeded):
					tl.uncertain++
					reopen(s)
				case errors.Is(err, context.DeadlineExceeded):
					tl.cancelled++
				default:
					t.Errorf("tick %d: %v; want a grant, or an error that says the context ended", tick, err)
				}
			}
		})
	}
	wg.Wait()
	final := sqlitetest.Open(t, path).Authority()
	for g, tl := range tallies {
		resource := []string{"r0", "r1"}[g]
		t.Logf("%s: %d granted, %d cancelled before commit, %d unknown", resource, len(tl.granted), tl.cancelled, tl.uncertain)
		if !slices.IsSorted(tl.granted) || len(slices.Compact(slices.Clone(tl.granted))) != len(tl.granted) {
			t.Errorf("%s: granted epochs %v are not strictly increasing", resource, tl.granted)
		}
		// The epoch the next grant gets tells how many were consumed.
		next, err := final.Acquire(context.Background(), resource, "Z", 1000, 1)
		if err != nil {
			t.Fatal(err)
		}
		consumed := next.Epoch - 1
		if consumed < int64(len(tl.granted)) || consumed > int64(len(tl.granted)+tl.uncertain) {
			t.Errorf("%s: %d epochs consumed by %d grants and %d unknown outcomes", resource, consumed, len(tl.granted), tl.uncertain)
		}
	}
}

// Two goroutines on one in-memory store see one database: the store's one
// connection is the database, and a second connection would be a second,
// empty one.
func TestInMemoryStoreIsOneDatabaseForEveryGoroutine(t *testing.T) {
	store := sqlitetest.Open(t, ":memory:")
	auth := store.Authority()
	var mu sync.Mutex
	var epochs []int64
	var tick int64
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for range 100 {
				mu.Lock()
				tick++
				now := tick
				mu.Unlock()
				// Each goroutine may run ahead of the other's tick; a
				// refusal for running backwards is fine, a second
				// database is not.
				lease, err := auth.Acquire(context.Background(), "r", "A", now, 1)
				if errors.Is(err, leases.ErrTickBackwards) {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				epochs = append(epochs, lease.Epoch)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.Sort(epochs)
	for i, e := range epochs {
		if e != int64(i+1) {
			t.Fatalf("epochs %v: want 1..%d, each once, from one database", epochs, len(epochs))
		}
	}
}
