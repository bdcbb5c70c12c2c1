package etcdstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"leases"
	"leases/etcd"
)

// Benchmarks on the shared three-member cluster, one caller at a time.
// Floors: a bare transaction that puts one key (what any write costs: one
// round trip and one Raft commit) and etcd's own lock, concurrency.Mutex.
// Each operation is timed in alternation with its floor, call by call, and
// reports both means and their ratio (x-floor): on a shared machine the
// load changes from second to second, and a ratio of two benchmarks run a
// minute apart says more about the load than about the code. Every
// operation runs twice: with the store's cache (one round trip while its
// guess is right) and with no guess (each call on a store that has seen
// nothing, which learns the key from its first transaction's Else: two
// round trips, what reading first costs).
func BenchmarkFloorTxnPut(b *testing.B) {
	ctx, c := context.Background(), client(b)
	key := benchPrefix(b) + "k"
	for b.Loop() {
		if _, err := c.Txn(ctx).Then(clientv3.OpPut(key, "v")).Commit(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFloorMutexLockUnlock(b *testing.B) {
	ctx, c := context.Background(), client(b)
	b.Run("one session", func(b *testing.B) {
		session, err := concurrency.NewSession(c)
		if err != nil {
			b.Fatal(err)
		}
		defer session.Close()
		m := concurrency.NewMutex(session, benchPrefix(b))
		for b.Loop() {
			if err := m.Lock(ctx); err != nil {
				b.Fatal(err)
			}
			if err := m.Unlock(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("a session per lock", func(b *testing.B) {
		key := benchPrefix(b)
		for b.Loop() {
			session, err := concurrency.NewSession(c)
			if err != nil {
				b.Fatal(err)
			}
			m := concurrency.NewMutex(session, key)
			if err := m.Lock(ctx); err != nil {
				b.Fatal(err)
			}
			if err := m.Unlock(ctx); err != nil {
				b.Fatal(err)
			}
			if err := session.Close(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// benchPrefix is a key prefix of the benchmark run's own: -count runs a
// benchmark again under the same name, on the same cluster.
func benchPrefix(b *testing.B) string {
	return fmt.Sprintf("%s%d/", prefix(b), benchRuns.Add(1))
}

var benchRuns atomic.Int64

// designs runs an operation once per design of the store, each paired
// with the bare one-key transaction. The operation takes each call's
// store from store.
func designs(b *testing.B, operation func(store func() *etcd.Store) benchOp) {
	c := client(b)
	for _, design := range storeDesigns {
		b.Run(design.name, func(b *testing.B) {
			paired(b, txnPut(c, benchPrefix(b)+"floor"), operation(design.stores(c, benchPrefix(b))))
		})
	}
}

// storeDesigns are the two ways a call finds the key it decides on: the
// store's cached guess (the same store for every call), or no guess (a
// new store for every call).
var storeDesigns = []struct {
	name   string
	stores func(c *clientv3.Client, prefix string) func() *etcd.Store
}{
	{"cached guess", func(c *clientv3.Client, prefix string) func() *etcd.Store {
		s := etcd.New(c, etcd.Options{Prefix: prefix})
		return func() *etcd.Store { return s }
	}},
	{"no guess", func(c *clientv3.Client, prefix string) func() *etcd.Store {
		return func() *etcd.Store { return etcd.New(c, etcd.Options{Prefix: prefix}) }
	}},
}

// benchOp is the i-th call of an operation, after an untimed preparation.
type benchOp struct {
	prepare func(i int64) error // may be nil
	call    func(i int64) error
}

func txnPut(c *clientv3.Client, key string) benchOp {
	return benchOp{call: func(int64) error {
		_, err := c.Txn(context.Background()).Then(clientv3.OpPut(key, "v")).Commit()
		return err
	}}
}

// paired times op and floor in alternation, taking turns at going first,
// and reports the mean of each and their ratio.
func paired(b *testing.B, floor, op benchOp) {
	var spent [2]time.Duration
	var i int64
	for b.Loop() {
		pair := [2]benchOp{op, floor}
		for turn := range 2 {
			which := (turn + int(i)) % 2
			if prepare := pair[which].prepare; prepare != nil {
				if err := prepare(i); err != nil {
					b.Fatal(err)
				}
			}
			start := time.Now()
			if err := pair[which].call(i); err != nil {
				b.Fatal(err)
			}
			spent[which] += time.Since(start)
		}
		i++
	}
	b.ReportMetric(float64(spent[0].Microseconds())/float64(i), "op-µs")
	b.ReportMetric(float64(spent[1].Microseconds())/float64(i), "floor-µs")
	b.ReportMetric(float64(spent[0])/float64(spent[1]), "x-floor")
}

// Each acquire takes the resource at the expiry of the one before.
func BenchmarkAcquire(b *testing.B) {
	designs(b, func(store func() *etcd.Store) benchOp {
		return benchOp{call: func(i int64) error {
			_, err := store().Authority().Acquire(context.Background(), "r", "A", i, 1)
			return err
		}}
	})
}

// A waiter's acquire right after another process released the lease (the
// release seen, as a waiting session sees it, through a watch): the path
// on which the store's guess is another process's write. Untimed: the
// other process's acquire and release, and the wait for the watch.
func BenchmarkAcquireAfterAnotherProcess(b *testing.B) {
	ctx := context.Background()
	p := benchPrefix(b)
	holder := etcd.New(client(b), etcd.Options{Prefix: p}).Authority()
	waiter := etcd.New(client(b), etcd.Options{Prefix: p}).Authority()
	paired(b, txnPut(client(b), p+"floor"), benchOp{
		prepare: func(i int64) error {
			held, err := holder.Acquire(ctx, "r", "A", 2*i, 1)
			if err != nil {
				return err
			}
			changed, err := waiter.Changed(ctx, "r")
			if err != nil {
				return err
			}
			if err := holder.Release(ctx, held, 2*i); err != nil {
				return err
			}
			<-changed
			return nil
		},
		call: func(i int64) error {
			_, err := waiter.Acquire(ctx, "r", "B", 2*i, 1)
			return err
		},
	})
}

func BenchmarkRenew(b *testing.B) {
	designs(b, func(store func() *etcd.Store) benchOp {
		var held leases.Lease
		return benchOp{
			prepare: func(i int64) (err error) {
				if i == 0 {
					held, err = store().Authority().Acquire(context.Background(), "r", "A", 0, 1<<40)
				}
				return err
			},
			call: func(i int64) (err error) {
				held, err = store().Authority().Renew(context.Background(), held, i+1, 1)
				return err
			},
		}
	})
}

// The acquire before each release is not timed.
func BenchmarkRelease(b *testing.B) {
	designs(b, func(store func() *etcd.Store) benchOp {
		var held leases.Lease
		return benchOp{
			prepare: func(i int64) (err error) {
				held, err = store().Authority().Acquire(context.Background(), "r", "A", i, 10)
				return err
			},
			call: func(i int64) error { return store().Authority().Release(context.Background(), held, i) },
		}
	})
}

// Each write comes with the next epoch, so each is accepted.
func BenchmarkFencedWrite(b *testing.B) {
	designs(b, func(store func() *etcd.Store) benchOp {
		return benchOp{call: func(i int64) error {
			got, err := store().Receiver(leases.Fenced).Write(context.Background(), "r", i+1, "v")
			if err == nil && got.Outcome != leases.Accepted {
				err = fmt.Errorf("write at epoch %d: %s", i+1, got.Outcome)
			}
			return err
		}}
	})
}

// Each write comes from a new lease, acquired untimed, so each is
// accepted.
func BenchmarkGuardedWrite(b *testing.B) {
	designs(b, func(store func() *etcd.Store) benchOp {
		var held leases.Lease
		return benchOp{
			prepare: func(i int64) (err error) {
				held, err = store().Authority().Acquire(context.Background(), "r", "A", i, 1)
				return err
			},
			call: func(i int64) error {
				got, err := store().Guarded().Write(context.Background(), held, i, "v")
				if err == nil && got.Outcome != leases.Accepted {
					err = fmt.Errorf("guarded write at tick %d: %s", i, got.Outcome)
				}
				return err
			},
		}
	})
}

// The lease's Lock and Unlock, paired with etcd's Mutex: the floor here is
// Lock+Unlock on one long-lived session, and on a session of its own.
func BenchmarkAcquireRelease(b *testing.B) {
	c := client(b)
	acquireRelease := func(store func() *etcd.Store) benchOp {
		return benchOp{call: func(i int64) error {
			held, err := store().Authority().Acquire(context.Background(), "r", "A", i, 10)
			if err == nil {
				err = store().Authority().Release(context.Background(), held, i)
			}
			return err
		}}
	}
	for _, design := range storeDesigns {
		b.Run(design.name+" vs mutex, one session", func(b *testing.B) {
			session, err := concurrency.NewSession(c)
			if err != nil {
				b.Fatal(err)
			}
			defer session.Close()
			op := acquireRelease(design.stores(c, benchPrefix(b)))
			paired(b, mutexLockUnlock(func() (*concurrency.Session, error) { return session, nil }, benchPrefix(b), false), op)
		})
		b.Run(design.name+" vs mutex, a session per lock", func(b *testing.B) {
			op := acquireRelease(design.stores(c, benchPrefix(b)))
			paired(b, mutexLockUnlock(func() (*concurrency.Session, error) { return concurrency.NewSession(c) }, benchPrefix(b), true), op)
		})
	}
}

// mutexLockUnlock locks and unlocks a Mutex at key on the session that
// session returns, closing it afterwards if closeAfter.
func mutexLockUnlock(session func() (*concurrency.Session, error), key string, closeAfter bool) benchOp {
	return benchOp{call: func(int64) error {
		ctx := context.Background()
		s, err := session()
		if err != nil {
			return err
		}
		m := concurrency.NewMutex(s, key)
		err = errors.Join(m.Lock(ctx), m.Unlock(ctx))
		if closeAfter {
			err = errors.Join(err, s.Close())
		}
		return err
	}}
}
