package etcd

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"leases"
	"leases/internal/outcome"
	"leases/internal/rules"
)

// namedPerRead bounds the holder keys one read asks for by name: etcd
// refuses a transaction of more than 128 operations by default.
const namedPerRead = 64

// Live implements [leases.Lessor.Live]: a linearizable read of the holder
// keys (the named ones, or every one under the prefix), then the time to
// live of each one's etcd lease, as Lease does. etcd's leader keeps the
// time and says only how many whole seconds are left (rounded down), so
// the tick returned is this process's wall clock read after etcd
// answered, and each lease's ExpiresAt is that tick plus one second more
// than etcd reported: a bound that etcd's own expiry stays below, never an
// earlier time (leases.LocalMillis). GrantedAt is 0: etcd does not say.
func (l *lessor) Live(ctx context.Context, resources ...string) ([]leases.Lease, int64, error) {
	resources, err := checkedNames(resources)
	if err != nil {
		return nil, 0, err
	}
	ctx, cancel := l.store.bound(ctx)
	defer cancel()
	views, err := l.store.kindViews(ctx, heldKind, resources)
	if err != nil {
		return nil, 0, fmt.Errorf("live leases: %w", err)
	}
	type found struct {
		lease leases.Lease
		left  int64 // whole seconds etcd said were left
	}
	var live []found
	for _, v := range views {
		if !v.found() {
			continue
		}
		record, err := decodeHold(v)
		if err != nil {
			return nil, 0, fmt.Errorf("live leases: %w", err)
		}
		var ttl *clientv3.LeaseTimeToLiveResponse
		err = l.ask(ctx, func() (err error) {
			ttl, err = l.store.client.TimeToLive(ctx, clientv3.LeaseID(record.Lease))
			return err
		})
		if err != nil {
			return nil, 0, fmt.Errorf("live leases: time to live of %s's etcd lease: %w", v.key, outcome.BeforeCommit(ctx, boundEnded(ctx, err)))
		}
		if ttl.TTL < 0 { // ended since the read
			continue
		}
		resource := strings.TrimPrefix(v.key, l.store.key(heldKind, ""))
		live = append(live, found{leases.Lease{Resource: resource, Holder: record.Holder, Epoch: record.Epoch, Ticks: leases.LocalMillis}, ttl.TTL})
	}
	now := time.Now().UnixMilli()
	out := make([]leases.Lease, len(live))
	for i, f := range live {
		out[i] = f.lease
		out[i].ExpiresAt = now + (f.left+1)*1000
	}
	return out, now, nil
}

// Live implements [leases.Authority.Live]: a linearizable read of the
// authority's rows (the named ones, or every one under the prefix), each
// decided live by package rules at tick now.
func (a *authority) Live(ctx context.Context, now int64, resources ...string) ([]leases.Lease, error) {
	resources, err := checkedNames(resources)
	if err == nil {
		err = rules.CheckTick(now)
	}
	if err != nil {
		return nil, err
	}
	ctx, cancel := a.store.bound(ctx)
	defer cancel()
	views, err := a.store.kindViews(ctx, authorityKind, resources)
	if err != nil {
		return nil, fmt.Errorf("live leases at tick %d: %w", now, err)
	}
	var live []leases.Lease
	for _, v := range views {
		row, found, err := decodeRow(v)
		if err != nil {
			return nil, fmt.Errorf("live leases at tick %d: %w", now, err)
		}
		resource := strings.TrimPrefix(v.key, a.store.key(authorityKind, ""))
		if lease, ok := rules.Holder(row, found, resource, now); ok {
			live = append(live, lease)
		}
	}
	return live, nil
}

// checkedNames is resources checked, sorted and without repeats.
func checkedNames(resources []string) ([]string, error) {
	for _, resource := range resources {
		if err := rules.CheckName("resource", resource); err != nil {
			return nil, err
		}
	}
	return slices.Compact(slices.Sorted(slices.Values(resources))), nil
}

// kindViews reads, linearizably, the keys of kind for resources, or
// every key under the kind's prefix when there are none, in key order,
// within the call's bound ctx.
func (s *Store) kindViews(ctx context.Context, kind string, resources []string) ([]view, error) {
	var views []view
	if len(resources) == 0 {
		all := s.key(kind, "")
		var resp *clientv3.GetResponse
		err := s.ask(ctx, func() (err error) {
			resp, err = s.client.Get(ctx, all, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
			return err
		})
		if err != nil {
			return nil, outcome.BeforeCommit(ctx, boundEnded(ctx, err))
		}
		for _, kv := range resp.Kvs {
			views = append(views, view{key: string(kv.Key), value: kv.Value, rev: kv.ModRevision})
		}
	}
	for chunk := range slices.Chunk(resources, namedPerRead) {
		keys := make([]string, len(chunk))
		for i, resource := range chunk {
			keys[i] = s.key(kind, resource)
		}
		read, _, err := s.readWithin(ctx, keys...)
		if err != nil {
			return nil, outcome.BeforeCommit(ctx, err)
		}
		views = append(views, read...)
	}
	return views, nil
}
