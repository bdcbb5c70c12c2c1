package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"leases"
	"leases/internal/outcome"
	"leases/internal/rules"
)

// Kinds of keys of the Lessor, apart from the explicit-tick authority's:
// the two never decide on each other's keys.
const (
	heldKind   = "held/"   // <prefix>held/<resource>: the holder, attached to an etcd lease
	epochsKind = "epochs/" // <prefix>epochs/<resource>: the last epoch granted; never deleted
)

// Lessor returns the store's leases timed by etcd itself: each holder key
// is attached to an etcd lease, whose time-to-live etcd's leader counts
// and which it ends by deleting the key, so no caller's clock decides
// anything. A grant is one transaction that creates the resource's holder
// key, attached to the Lessor's etcd lease of that TTL (one per TTL,
// shared by the Lessor's tenures, as etcd's concurrency.Session shares
// one: see renewals.go for what that changes), only while no such key
// exists, and raises the resource's epoch key, compared on the revision
// it was read at; a renewal is a keep-alive of the etcd lease, one for
// every renewal waiting, a release the deletion of the holder key.
// Epochs stay strictly increasing: the epoch key is never deleted.
//
// etcd counts a lease's time-to-live in whole seconds, and never less
// than its minimum (one and a half election timeouts): a TTL is rounded
// up to the next second, and the holder's session counts the TTL it asked
// for, from when it sent the request, so the etcd lease outlives the
// session's belief. When etcd's leader changes, the new leader gives
// every lease its time-to-live afresh: leases last longer, never shorter.
//
// The ticks in the leases it returns are this process's wall clock, in
// milliseconds, when the answer came, and the time-to-live etcd reports:
// nothing decides on them. Only the Lessor may write its keys: a holder
// key deleted by hand (or by a release from another process) ends its
// tenure at the tenure's next renewal, which learns the key's state after
// its keep-alive was answered (a read, or for a large batch the Lessor's
// watch: renewals.go): the shared etcd lease outlives any one tenure.
func (s *Store) Lessor() leases.Lessor {
	return &lessor{store: s, shared: map[int64]*sharedLease{}, tenures: map[tenure]*heldTenure{},
		batches: map[clientv3.LeaseID]*keepAlives{}, keepAliveOnce: s.client.KeepAliveOnce, readHeld: s.readAt,
		owners: ownersOf(s)}
}

type lessor struct {
	store  *Store
	places places // this process's places in lines (line.go)
	mu     sync.Mutex
	// shared are the etcd leases that new grants attach their keys to,
	// by TTL in seconds (renewals.go).
	shared map[int64]*sharedLease
	// tenures are the tenures this Lessor granted and that have not
	// ended, so that a renewal or a release need not read the holder
	// key first.
	tenures map[tenure]*heldTenure
	// batches are the keep-alives being sent, by etcd lease.
	batches map[clientv3.LeaseID]*keepAlives
	// keepAliveOnce is the client's; the tests of batches hold it.
	keepAliveOnce func(context.Context, clientv3.LeaseID) (*clientv3.LeaseKeepAliveResponse, error)
	// readHeld is the store's read, of a batch's holder keys after its
	// keep-alive was answered; the tests of batches, with no cluster,
	// answer it themselves.
	readHeld func(context.Context, ...string) ([]view, int64, error)
	// owners is the watch that answers large batches instead of the
	// reads (owners.go); the tests of batches give it their own.
	owners *owners
}

var _ leases.Lessor = (*lessor)(nil)

// tenure names one grant.
type tenure struct {
	resource, holder string
	epoch            int64
}

// holdRecord is the value of a holder key.
type holdRecord struct {
	Holder string `json:"holder"`
	Epoch  int64  `json:"epoch"`
	Lease  int64  `json:"lease"` // the etcd lease the key is attached to
}

// decodeHold is the record a holder key v holds.
func decodeHold(v view) (holdRecord, error) {
	var record holdRecord
	if err := json.Unmarshal(v.value, &record); err != nil {
		return holdRecord{}, fmt.Errorf("decode %s: %w", v.key, err)
	}
	return record, nil
}

// Acquire implements [leases.Lessor.Acquire].
func (l *lessor) Acquire(ctx context.Context, resource, holder string, ttl time.Duration) (leases.Lease, error) {
	if _, err := rules.CheckDuration(ttl); err != nil {
		return leases.Lease{}, err
	}
	if err := rules.First(rules.CheckName("resource", resource), rules.CheckName("holder", holder)); err != nil {
		return leases.Lease{}, err
	}
	ctx, cancel := l.store.bound(ctx)
	defer cancel()
	lease, err := l.acquire(ctx, resource, holder, ttl)
	if err != nil {
		return lease, fmt.Errorf("acquire %q for %q: %w", resource, holder, boundEnded(ctx, err))
	}
	return lease, nil
}

// ask sends one request of the Lessor, and sends it again, paced, while
// members refuse it for want of a leader (nothing was proposed), within
// the call's bound, ctx.
func (l *lessor) ask(ctx context.Context, request func() error) error {
	return l.store.ask(ctx, request)
}

// ask sends one request, and sends it again, paced, while members refuse
// it for want of a leader (nothing was proposed), within the call's bound,
// ctx.
func (s *Store) ask(ctx context.Context, request func() error) error {
	var refusals retries
	for {
		err := request()
		if !noLeader(err) {
			return err
		}
		if err := refusals.wait(ctx, s.client); err != nil {
			return err
		}
	}
}

func (l *lessor) acquire(ctx context.Context, resource, holder string, ttl time.Duration) (leases.Lease, error) {
	s := l.store
	heldKey, epochKey := s.key(heldKind, resource), s.key(epochsKind, resource)
	began := time.Now()
	shared, seconds, err := l.use(ctx, ttl)
	if err != nil {
		return leases.Lease{}, outcome.BeforeCommit(ctx, fmt.Errorf("an etcd lease: %w", err))
	}
	granted := false
	l.owners.want(heldKey) // before the grant is sent: the watch records every event after it
	defer func() {
		if !granted { // nothing holds it: revoked now if nothing else uses it
			l.owners.unwant(heldKey)
			l.unuse(shared)
		}
	}()
	epochs := s.cache.guess([]string{epochKey})[0]
	for {
		last, err := decodeEpoch(epochs)
		if err != nil {
			return leases.Lease{}, outcome.BeforeCommit(ctx, err)
		}
		record, err := json.Marshal(holdRecord{Holder: holder, Epoch: last + 1, Lease: int64(shared.id)})
		if err != nil {
			return leases.Lease{}, err
		}
		resp, err := l.grantTxn(ctx, shared, resource, holder, record, last, epochs)
		now := time.Now().UnixMilli()
		lease := leases.Lease{Resource: resource, Holder: holder, Epoch: last + 1, GrantedAt: now, ExpiresAt: now + seconds*1000, Ticks: leases.LocalMillis}
		if errors.Is(err, errSharedEnded) {
			return leases.Lease{}, outcome.BeforeCommit(ctx, err)
		}
		if err != nil {
			// The grant may have been applied, or be on its way: keep
			// it as a tenure, for Release, whose delete ends it, or
			// for its reaper, at its deadline.
			granted = true
			s.cache.forget([]string{epochKey})
			l.hold(tenure{resource, holder, last + 1}, shared, began, ttl, 0)
			return lease, outcomeUnknown(ctx, err)
		}
		if resp.Succeeded {
			granted = true
			l.places.forget(resource, holder)
			s.cache.remember(view{key: epochKey, value: []byte(strconv.FormatInt(last+1, 10)), rev: resp.Header.Revision})
			l.hold(tenure{resource, holder, last + 1}, shared, began, ttl, resp.Header.Revision)
			return lease, nil
		}
		if epochs, err = l.refused(ctx, resource, holder, ttl, heldKey, epochKey, resp); err != nil {
			return leases.Lease{}, err
		}
		// The epoch moved on (another grant came first and has ended
		// since), the holder's lease ran out just now, or the line taught
		// this holder its rank: decide again.
	}
}

// grantTxn sends a grant's transaction: the holder key, attached to the
// shared etcd lease, only while there is none, and the next epoch, only
// while the epoch key is as it was read and holder is first in the
// resource's line (line.go), whose place it leaves.
func (l *lessor) grantTxn(ctx context.Context, shared *sharedLease, resource, holder string, record []byte,
	last int64, epochs view) (*clientv3.TxnResponse, error) {
	heldKey, epochKey := l.store.key(heldKind, resource), l.store.key(epochsKind, resource)
	var resp *clientv3.TxnResponse
	err := l.ask(ctx, func() (err error) {
		resp, err = l.store.client.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(heldKey), "=", 0), epochs.unchanged(), l.firstInLine(resource, holder)).
			Then(clientv3.OpPut(heldKey, string(record), clientv3.WithLease(shared.id)),
				clientv3.OpPut(epochKey, strconv.FormatInt(last+1, 10)), l.leaveLine(resource, holder)).
			Else(append([]clientv3.Op{clientv3.OpGet(heldKey), clientv3.OpGet(epochKey)}, l.lineReads(resource, holder)...)...).
			Commit()
		return err
	})
	if errors.Is(rpctypes.Error(err), rpctypes.ErrLeaseNotFound) { // ended since its keep-alive: nothing was put
		l.ended(shared)
		return nil, fmt.Errorf("%w: %w", errSharedEnded, err)
	}
	return resp, err
}

// errSharedEnded reports a grant's transaction that etcd refused because
// the shared etcd lease had ended: nothing was written.
var errSharedEnded = errors.New("the shared etcd lease ended")

// refused reads resp, the answer of a grant that did not succeed: the
// refusal of a holder still live (holder then takes its place in the
// line), of a waiter ahead in the line, or the epoch key as it is now,
// for acquire to decide again on.
func (l *lessor) refused(ctx context.Context, resource, holder string, ttl time.Duration, heldKey, epochKey string, resp *clientv3.TxnResponse) (view, error) {
	if len(resp.Responses) != 4 {
		return view{}, outcome.BeforeCommit(ctx, fmt.Errorf("read 4 keys, got %d responses", len(resp.Responses)))
	}
	views, err := viewsOf([]string{heldKey, epochKey}, resp.Responses[:2])
	if err != nil {
		return view{}, outcome.BeforeCommit(ctx, err)
	}
	l.store.cache.remember(views[1])
	if views[0].found() {
		l.mine(resource, holder, resp.Responses[2:])
		if err := l.held(ctx, resource, views[0]); !errors.Is(err, errRanOut) {
			return view{}, l.joinLine(ctx, resource, holder, ttl, err)
		}
	} else if again, err := l.behind(ctx, resource, holder, ttl, resp.Responses[2:]); !again {
		return view{}, err
	}
	return views[1], nil
}

// held is the refusal of an acquire while the holder key v exists.
func (l *lessor) held(ctx context.Context, resource string, v view) error {
	record, err := decodeHold(v)
	if err != nil {
		return outcome.BeforeCommit(ctx, err)
	}
	var remaining *clientv3.LeaseTimeToLiveResponse
	err = l.ask(ctx, func() (err error) {
		remaining, err = l.store.client.TimeToLive(ctx, clientv3.LeaseID(record.Lease))
		return err
	})
	if err != nil {
		return outcome.BeforeCommit(ctx, fmt.Errorf("time to live of the holder's etcd lease: %w", err))
	}
	if remaining.TTL < 0 { // ended between the two reads
		return errRanOut
	}
	// etcd reports whole seconds left, rounded down: the lease lasts
	// less than one more than that. A waiter waits for the bound, or for
	// the watch that sees etcd delete the key.
	now := time.Now().UnixMilli()
	return &leases.HeldError{At: now, Live: leases.Lease{Resource: resource, Holder: record.Holder, Epoch: record.Epoch,
		ExpiresAt: now + (remaining.TTL+1)*1000, Ticks: leases.LocalMillis}}
}

// errRanOut is held's answer for a holder key whose etcd lease ended
// between the read of the key and of the lease.
var errRanOut = errors.New("the holder's etcd lease ran out")

// Renew implements [leases.Lessor.Renew]: a keep-alive of held's etcd
// lease, which etcd's leader extends to its whole time-to-live from now,
// sent in the next batch of keep-alives of that lease (renewals.go).
// The TTL is the grant's; ttl must be valid but does not change it.
func (l *lessor) Renew(ctx context.Context, held leases.Lease, ttl time.Duration) (leases.Lease, error) {
	if _, err := rules.CheckDuration(ttl); err != nil {
		return leases.Lease{}, err
	}
	if err := rules.CheckHeld(held, 0); err != nil {
		return leases.Lease{}, err
	}
	began := time.Now()
	ctx, cancel := l.store.bound(ctx)
	defer cancel()
	t := tenure{held.Resource, held.Holder, held.Epoch}
	id, own, err := l.leaseOf(ctx, held)
	if err != nil {
		return leases.Lease{}, fmt.Errorf("renew %q for %q: %w", held.Resource, held.Holder, boundEnded(ctx, err))
	}
	var renews *leases.Lease // a tenure of this Lessor: its key is read in the batch
	if own != nil {
		renews = &held
	}
	a := l.keepAlive(ctx, id, renews)
	switch {
	case leaseEnded(a.resp, a.err):
		if own != nil {
			l.ended(own.shared)
			l.drop(t, own)
		}
		return leases.Lease{}, fmt.Errorf("renew %q for %q: %w", held.Resource, held.Holder, errEnded(held))
	case a.err != nil:
		// The keep-alive may have reached the leader: the lease may have
		// been extended, or not. Either way it lasts no shorter. Or its
		// key could not be read after it: the tenure may have ended.
		return leases.Lease{}, fmt.Errorf("renew %q for %q: %w", held.Resource, held.Holder, boundEnded(ctx, outcomeUnknown(ctx, a.err)))
	case own != nil && (!a.held || !l.renewed(t, own, began, ttl)):
		// The shared etcd lease outlives a tenure whose key was deleted
		// (a release from another process, the reaper): the keep-alive
		// alone would renew it, so the batch read the key after it.
		l.drop(t, own)
		return leases.Lease{}, fmt.Errorf("renew %q for %q: %w", held.Resource, held.Holder, errEnded(held))
	}
	now := time.Now().UnixMilli()
	held.ExpiresAt, held.Ticks = now+a.resp.TTL*1000, leases.LocalMillis
	return held, nil
}

// Release implements [leases.Lessor.Release]: the deletion of held's
// holder key, in a transaction that compares it is held's; the shared
// etcd lease is revoked once no tenure of this Lessor uses it.
func (l *lessor) Release(ctx context.Context, held leases.Lease) error {
	if err := rules.CheckHeld(held, 0); err != nil {
		return err
	}
	ctx, cancel := l.store.bound(ctx)
	defer cancel()
	t := tenure{held.Resource, held.Holder, held.Epoch}
	id, own, err := l.leaseOf(ctx, held)
	if err != nil {
		return fmt.Errorf("release %q for %q: %w", held.Resource, held.Holder, boundEnded(ctx, err))
	}
	deleted, err := l.deleteKey(ctx, t, id)
	if err == nil && !deleted {
		deleted, err = l.stopLateGrant(ctx, t, id)
	}
	if err != nil {
		return fmt.Errorf("release %q for %q: %w", held.Resource, held.Holder, boundEnded(ctx, err))
	}
	if own != nil {
		l.drop(t, own)
	}
	if !deleted {
		return fmt.Errorf("release %q for %q: %w", held.Resource, held.Holder, errEnded(held))
	}
	return nil
}

// Lease implements [leases.Lessor.Lease] with one linearizable read of
// the holder key, and of its etcd lease's time to live.
func (l *lessor) Lease(ctx context.Context, resource string) (leases.Lease, bool, error) {
	if err := rules.CheckName("resource", resource); err != nil {
		return leases.Lease{}, false, err
	}
	views, err := l.store.read(ctx, l.store.key(heldKind, resource))
	if err != nil {
		return leases.Lease{}, false, fmt.Errorf("holder of %q: %w", resource, outcome.BeforeCommit(ctx, err))
	}
	if !views[0].found() {
		return leases.Lease{}, false, nil
	}
	bounded, cancel := l.store.bound(ctx)
	defer cancel()
	var held *leases.HeldError
	switch err := l.held(bounded, resource, views[0]); {
	case errors.Is(err, errRanOut):
		return leases.Lease{}, false, nil
	case !errors.As(err, &held):
		return leases.Lease{}, false, fmt.Errorf("holder of %q: %w", resource, err)
	}
	return held.Live, true, nil
}

// Changed implements [leases.Lessor.Changed] with an etcd watch on the holder
// key: a grant, a release, or etcd ending the lease closes the channel;
// and on the resource's line, whose places' deletions close it too.
func (l *lessor) Changed(ctx context.Context, resource string) (<-chan struct{}, error) {
	return l.store.watch(ctx, resource, l.store.key(heldKind, resource), l.store.linePrefix(resource))
}

// leaseOf is the etcd lease of held: of its tenure in this Lessor, or
// read from the holder key, which must be held's.
func (l *lessor) leaseOf(ctx context.Context, held leases.Lease) (clientv3.LeaseID, *heldTenure, error) {
	l.mu.Lock()
	own, ok := l.tenures[tenure{held.Resource, held.Holder, held.Epoch}]
	l.mu.Unlock()
	if ok {
		return own.shared.id, own, nil
	}
	views, err := l.store.read(ctx, l.store.key(heldKind, held.Resource))
	if err != nil {
		return 0, nil, outcome.BeforeCommit(ctx, err)
	}
	if !views[0].found() {
		return 0, nil, fmt.Errorf("%w: epoch %d of %q ran out or was released", leases.ErrLeaseExpired, held.Epoch, held.Resource)
	}
	record, err := decodeHold(views[0])
	if err != nil {
		return 0, nil, outcome.BeforeCommit(ctx, err)
	}
	if record.Holder != held.Holder || record.Epoch != held.Epoch {
		return 0, nil, fmt.Errorf("%w: %q is held by %q at epoch %d, not by %q at epoch %d",
			leases.ErrNotHolder, held.Resource, record.Holder, record.Epoch, held.Holder, held.Epoch)
	}
	return clientv3.LeaseID(record.Lease), nil, nil
}

// decodeEpoch is the last epoch an epoch key holds, 0 when absent or 0.
func decodeEpoch(v view) (int64, error) {
	if !v.found() {
		return 0, nil
	}
	epoch, err := strconv.ParseInt(string(v.value), 10, 64)
	if err != nil || epoch < 0 { // 0: written by a release that stopped a late first grant (stopLateGrant)
		return 0, fmt.Errorf("decode %s: %q is not an epoch", v.key, v.value)
	}
	return epoch, nil
}
