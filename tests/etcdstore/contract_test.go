package etcdstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"leases"
	"leases/etcd"
	"leases/fence"
	"leases/leasestest"
	"leases/testkit/sqlitetest"
)

// The contract's public suite, every clause, on the shared three-member
// cluster: the authority and the receivers, the Lessor on etcd's leases,
// whose expiry Expire waits for etcd to carry out, and as the guard a
// fence table in a SQLite file of the test's own, as a service that keeps
// its leases in etcd fences the rows it keeps elsewhere (the epoch alone:
// the lease is not in that database). The store's state is every key
// under its prefix, every etcd lease granted since the clause began, and
// the file's rows.
func TestContract(t *testing.T) {
	leasestest.Run(t, etcdBackend)
}

// backends counts the backends made, so that each is fresh, under a
// prefix of its own, on a shared cluster that outlives a test (-count).
var backends atomic.Int64

// etcdBackend is a fresh store on the shared cluster under a prefix of
// its own, as the suite sees it.
func etcdBackend(t *testing.T) leasestest.Backend {
	t.Helper()
	c, p := client(t), fmt.Sprintf("%s%d/", prefix(t), backends.Add(1))
	opts := options(t)
	opts.Prefix = p
	s := etcd.New(c, opts)
	path := sqlitetest.Path(t)
	db := sqlitetest.OpenDirectly(t, path)
	t.Cleanup(func() { _ = db.Close() })
	fences, err := fence.New(db, fence.Options{})
	if err == nil {
		err = fences.Create(t.Context())
	}
	if err == nil {
		_, err = db.ExecContext(t.Context(), `CREATE TABLE work (resource TEXT, epoch INTEGER)`)
	}
	if err != nil {
		t.Fatal(err)
	}
	observer, err := sharedCluster(t).MemberClient(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = observer.Close() })
	keys := keysAndNewLeases(observer, p)
	lessor := s.Lessor()
	return leasestest.Backend{
		Authority: s.Authority(),
		State: func(ctx context.Context) (string, error) {
			k, err := keys(ctx)
			if err != nil {
				return "", err
			}
			rows, err := sqlitetest.DumpContext(ctx, path)
			return k + rows, err
		},
		Fenced:   s.Receiver(leases.Fenced),
		Unfenced: s.Receiver(leases.Unfenced),
		Guarded:  s.Guarded(),
		Lessor:   lessor,
		Expire:   func(ctx context.Context, l leases.Lease) error { return ended(ctx, lessor, l.Resource) },
		Guard:    fences,
		Work: func(ctx context.Context, tx *sql.Tx, l leases.Lease) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO work VALUES (?, ?)`, l.Resource, l.Epoch)
			return err
		},
	}
}

// ended returns once resource is no longer held: etcd's leader has ended
// its lease, and the watch saw the holder key go.
func ended(ctx context.Context, lessor leases.Lessor, resource string) error {
	for {
		watch, stop := context.WithCancel(ctx)
		changed, err := lessor.Changed(watch, resource)
		if err != nil {
			stop()
			return err
		}
		_, held, err := lessor.Lease(ctx, resource)
		if err != nil || !held {
			stop()
			return err
		}
		select {
		case <-changed:
			stop()
		case <-ctx.Done():
			stop()
			return fmt.Errorf("%s still held: %w", resource, context.Cause(ctx))
		}
	}
}

// A receiver of a mode that is neither fenced nor unfenced refuses every
// write as invalid input.
func TestReceiverOfAnUnknownMode(t *testing.T) {
	if _, err := newStore(t).Receiver("half-fenced").Write(testContext(t), "r", 2, "x"); !errors.Is(err, leases.ErrInvalidInput) {
		t.Fatalf("a write to a receiver of an unknown mode: %v; want ErrInvalidInput", err)
	}
}

// keysAndNewLeases renders every key under prefix with its value and the
// revision that last wrote it (a rewrite of the same value shows too),
// and every etcd lease granted since its first call: a grant leaves no
// key when the transaction that would attach it is never sent. c is a
// client of one member: the read of the keys, linearizable, returns once
// that member has applied every change committed before it, which the
// list of leases, answered by the member from what it has applied, then
// shows too.
func keysAndNewLeases(c *clientv3.Client, prefix string) func(ctx context.Context) (string, error) {
	var before []clientv3.LeaseID
	first := true
	return func(ctx context.Context) (string, error) {
		keys, err := c.Get(ctx, prefix, clientv3.WithPrefix())
		if err != nil {
			return "", err
		}
		resp, err := c.Leases(ctx)
		if err != nil {
			return "", err
		}
		var ids, granted []clientv3.LeaseID
		for _, l := range resp.Leases {
			ids = append(ids, l.ID)
		}
		if first {
			before, first = ids, false
		}
		for _, id := range ids {
			if !slices.Contains(before, id) {
				granted = append(granted, id)
			}
		}
		// The Lessor's waiting line, and the etcd leases of its places,
		// are left out: a refused Acquire takes a place, which changes
		// no lease (leasestest.Backend.State).
		var out strings.Builder
		var places []clientv3.LeaseID
		for _, kv := range keys.Kvs {
			key := strings.TrimPrefix(string(kv.Key), prefix)
			if strings.HasPrefix(key, "line/") {
				places = append(places, clientv3.LeaseID(kv.Lease))
				continue
			}
			fmt.Fprintf(&out, "%s @%d %s\n", key, kv.ModRevision, kv.Value)
		}
		for _, id := range granted {
			if slices.Contains(places, id) {
				continue
			}
			fmt.Fprintf(&out, "etcd lease %x granted\n", id)
		}
		return out.String(), nil
	}
}

// leaseOf is the lease the authority grants.
func leaseOf(resource, holder string, epoch, grantedAt, expiresAt int64) leases.Lease {
	return leases.Lease{Resource: resource, Holder: holder, Epoch: epoch, GrantedAt: grantedAt, ExpiresAt: expiresAt}
}

// written is the record a write of value at epoch leaves behind.
func written(epoch int64, value string) leases.Record {
	return leases.Record{Epoch: epoch, ValueEpoch: epoch, Value: value}
}
