package etcd

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"leases"
	"leases/internal/rules"
)

// lineKind is the Lessor's lines (see leases.Lessor):
// <prefix>line/<resource, path-escaped>/<holder> is a waiter's place,
// ranked by its key's create revision (as etcd's own concurrency.Mutex
// ranks its waiters) and attached to an etcd lease of its own, which ends
// when the place does (rules.Place), so that etcd deletes the place of a
// waiter that went away. A grant deletes its holder's place in the same
// transaction; its etcd lease then runs out unused.
const lineKind = "line/"

// places is what this process knows of its holders' places: the create
// revision of each one's key, and until when its etcd lease lasts at
// least, on this process's clock. A guess: a grant's compare proves the
// rank, and a refusal brings the line as it stands.
type places struct {
	mu sync.Mutex
	m  map[[2]string]place
}

type place struct{ rev, until int64 }

func (p *places) get(resource, holder string) (place, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	got, ok := p.m[[2]string{resource, holder}]
	return got, ok
}

func (p *places) set(resource, holder string, pl place) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil || len(p.m) >= maxCached {
		p.m = map[[2]string]place{}
	}
	p.m[[2]string{resource, holder}] = pl
}

func (p *places) forget(resource, holder string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.m, [2]string{resource, holder})
}

// linePrefix is the prefix of resource's line; the path escape keeps a
// resource's line apart from that of a resource whose name extends it
// past a slash.
func (s *Store) linePrefix(resource string) string {
	return s.prefix + lineKind + url.PathEscape(resource) + "/"
}

// firstInLine is the compare of a grant to holder: every place in
// resource's line is holder's or came after it; with no place known for
// holder, the line is empty.
func (l *lessor) firstInLine(resource, holder string) clientv3.Cmp {
	prefix := l.store.linePrefix(resource)
	if p, ok := l.places.get(resource, holder); ok {
		return clientv3.Compare(clientv3.CreateRevision(prefix), ">", p.rev-1).WithPrefix()
	}
	return clientv3.Compare(clientv3.CreateRevision(prefix), "=", 0).WithPrefix()
}

// lineReads are what a refused grant reads of resource's line: its first
// place, and holder's.
func (l *lessor) lineReads(resource, holder string) []clientv3.Op {
	prefix := l.store.linePrefix(resource)
	return []clientv3.Op{
		clientv3.OpGet(prefix, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(1)),
		clientv3.OpGet(prefix + holder),
	}
}

// leaveLine is the grant's deletion of holder's place.
func (l *lessor) leaveLine(resource, holder string) clientv3.Op {
	return clientv3.OpDelete(l.store.linePrefix(resource) + holder)
}

// behind decides a refused grant of a free lease from the line it read
// (lineReads' answers): with another waiter first, the refusal (holder
// then takes its place); otherwise again is set, and the grant is tried
// again on what the read taught (holder's rank, or the epoch that moved).
func (l *lessor) behind(ctx context.Context, resource, holder string, ttl time.Duration, reads []*etcdserverpb.ResponseOp) (again bool, err error) {
	first, mine := firstKV(reads[0]), l.mine(resource, holder, reads)
	if first == nil || mine != nil && first.CreateRevision == mine.CreateRevision {
		return true, nil
	}
	var left *clientv3.LeaseTimeToLiveResponse
	if err := l.ask(ctx, func() (err error) {
		left, err = l.store.client.TimeToLive(ctx, clientv3.LeaseID(first.Lease))
		return err
	}); err != nil {
		return false, err
	}
	if left.TTL < 0 { // the place ended between the two reads
		return true, nil
	}
	now := time.Now().UnixMilli()
	ahead := rules.Waiter{Holder: strings.TrimPrefix(string(first.Key), l.store.linePrefix(resource)), Until: now + (left.TTL+1)*1000}
	return false, l.joinLine(ctx, resource, holder, ttl, rules.Queued(resource, ahead, now))
}

// mine is holder's place in the line as lineReads read it (nil for
// none), which this process's guess then follows.
func (l *lessor) mine(resource, holder string, reads []*etcdserverpb.ResponseOp) *mvccpb.KeyValue {
	mine := firstKV(reads[1])
	if mine == nil {
		l.places.forget(resource, holder)
		return nil
	}
	known, _ := l.places.get(resource, holder)
	l.places.set(resource, holder, place{rev: mine.CreateRevision, until: known.until})
	return mine
}

// joinLine takes, or keeps, holder's place in resource's line after
// refusal, and returns refusal: a place lasts until rules.Place says, an
// etcd lease of that many seconds (rounded up), written anew only when
// less than half its grace is left (rules.Refresh). A place that could
// not be written is no answer of its own: the refusal stands, and the
// next attempt tries again.
func (l *lessor) joinLine(ctx context.Context, resource, holder string, ttl time.Duration, refusal error) error {
	var held *leases.HeldError
	if !errors.As(refusal, &held) {
		return refusal
	}
	grace := ttl.Milliseconds()
	until, ok := rules.Place(holder, held, grace)
	known, _ := l.places.get(resource, holder)
	if !ok || !rules.Refresh(known.until, until, grace) {
		return refusal
	}
	now := time.Now().UnixMilli()
	var grant *clientv3.LeaseGrantResponse
	var put *clientv3.PutResponse
	err := l.ask(ctx, func() (err error) {
		grant, err = l.store.client.Grant(ctx, (until-now+999)/1000)
		return err
	})
	if err == nil {
		err = l.ask(ctx, func() (err error) {
			put, err = l.store.client.Put(ctx, l.store.linePrefix(resource)+holder, "", clientv3.WithLease(grant.ID), clientv3.WithPrevKV())
			return err
		})
	}
	if err != nil {
		l.places.forget(resource, holder)
		return refusal
	}
	rev := put.Header.Revision
	if put.PrevKv != nil {
		rev = put.PrevKv.CreateRevision
	}
	l.places.set(resource, holder, place{rev: rev, until: now + grant.TTL*1000})
	return refusal
}

// firstKV is the first key a read returned, nil for none.
func firstKV(r *etcdserverpb.ResponseOp) *mvccpb.KeyValue {
	if kvs := r.GetResponseRange().GetKvs(); len(kvs) > 0 {
		return kvs[0]
	}
	return nil
}
