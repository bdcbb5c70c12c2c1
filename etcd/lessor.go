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

// Lessor returns the store's leases timed by etcd itself: each grant is an
// etcd lease, whose time-to-live etcd's leader counts and which it ends by
// deleting the holder's key, so no caller's clock decides anything. A
// grant is one transaction that creates the resource's holder key,
// attached to a new etcd lease, only while no such key exists, and raises
// the resource's epoch key, compared on the revision it was read at; a
// renewal is a keep-alive of the etcd lease, a release its revocation.
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
// key deleted by hand would leave its etcd lease alive.
func (s *Store) Lessor() leases.Lessor { return &lessor{store: s, ids: map[tenure]clientv3.LeaseID{}} }

type lessor struct {
	store  *Store
	places places // this process's places in lines (line.go)
	mu     sync.Mutex
	// ids are the etcd leases of the tenures this process was granted,
	// so that a renewal or a release need not read the holder key first.
	ids map[tenure]clientv3.LeaseID
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
	var grant *clientv3.LeaseGrantResponse
	err := l.ask(ctx, func() (err error) {
		grant, err = s.client.Grant(ctx, int64((ttl+time.Second-1)/time.Second))
		return err
	})
	if err != nil {
		return leases.Lease{}, outcome.BeforeCommit(ctx, fmt.Errorf("grant an etcd lease: %w", err))
	}
	granted := false
	defer func() {
		if !granted { // nothing holds it: let it go now rather than at its expiry, within a bound of its own
			revoke, cancel := s.bound(context.WithoutCancel(ctx))
			defer cancel()
			_, _ = s.client.Revoke(revoke, grant.ID)
		}
	}()
	epochs := s.cache.guess([]string{epochKey})[0]
	for {
		last, err := decodeEpoch(epochs)
		if err != nil {
			return leases.Lease{}, outcome.BeforeCommit(ctx, err)
		}
		record, err := json.Marshal(holdRecord{Holder: holder, Epoch: last + 1, Lease: int64(grant.ID)})
		if err != nil {
			return leases.Lease{}, err
		}
		var resp *clientv3.TxnResponse
		err = l.ask(ctx, func() (err error) {
			resp, err = s.client.Txn(ctx).
				If(clientv3.Compare(clientv3.CreateRevision(heldKey), "=", 0), epochs.unchanged(), l.firstInLine(resource, holder)).
				Then(clientv3.OpPut(heldKey, string(record), clientv3.WithLease(grant.ID)),
					clientv3.OpPut(epochKey, strconv.FormatInt(last+1, 10)), l.leaveLine(resource, holder)).
				Else(append([]clientv3.Op{clientv3.OpGet(heldKey), clientv3.OpGet(epochKey)}, l.lineReads(resource, holder)...)...).
				Commit()
			return err
		})
		now := time.Now().UnixMilli()
		lease := leases.Lease{Resource: resource, Holder: holder, Epoch: last + 1, GrantedAt: now, ExpiresAt: now + grant.TTL*1000,
			Ticks: leases.LocalMillis}
		if err != nil {
			// The grant may have been applied, or be on its way: keep
			// its etcd lease, and remember it for Release, whose
			// revocation ends it or makes the late put fail.
			granted = true
			s.cache.forget([]string{epochKey})
			l.remember(tenure{resource, holder, last + 1}, grant.ID)
			return lease, outcomeUnknown(ctx, err)
		}
		if resp.Succeeded {
			granted = true
			l.places.forget(resource, holder)
			s.cache.remember(view{key: epochKey, value: []byte(strconv.FormatInt(last+1, 10)), rev: resp.Header.Revision})
			l.remember(tenure{resource, holder, last + 1}, grant.ID)
			return lease, nil
		}
		if len(resp.Responses) != 4 {
			return leases.Lease{}, outcome.BeforeCommit(ctx, fmt.Errorf("read 4 keys, got %d responses", len(resp.Responses)))
		}
		views, err := viewsOf([]string{heldKey, epochKey}, resp.Responses[:2])
		if err != nil {
			return leases.Lease{}, outcome.BeforeCommit(ctx, err)
		}
		s.cache.remember(views[1])
		epochs = views[1]
		if views[0].found() {
			l.mine(resource, holder, resp.Responses[2:])
			if err := l.held(ctx, resource, views[0]); !errors.Is(err, errRanOut) {
				return leases.Lease{}, l.joinLine(ctx, resource, holder, ttl, err)
			}
		} else if again, err := l.behind(ctx, resource, holder, ttl, resp.Responses[2:]); !again {
			return leases.Lease{}, err
		}
		// The epoch moved on (another grant came first and has ended
		// since), the holder's lease ran out just now, or the line taught
		// this holder its rank: decide again.
	}
}

// held is the refusal of an acquire while the holder key v exists.
func (l *lessor) held(ctx context.Context, resource string, v view) error {
	var record holdRecord
	if err := json.Unmarshal(v.value, &record); err != nil {
		return outcome.BeforeCommit(ctx, fmt.Errorf("decode %s: %w", v.key, err))
	}
	var remaining *clientv3.LeaseTimeToLiveResponse
	err := l.ask(ctx, func() (err error) {
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
// lease, which etcd's leader extends to its whole time-to-live from now.
// The TTL is the grant's; ttl must be valid but does not change it.
func (l *lessor) Renew(ctx context.Context, held leases.Lease, ttl time.Duration) (leases.Lease, error) {
	if _, err := rules.CheckDuration(ttl); err != nil {
		return leases.Lease{}, err
	}
	if err := rules.CheckHeld(held, 0); err != nil {
		return leases.Lease{}, err
	}
	ctx, cancel := l.store.bound(ctx)
	defer cancel()
	id, err := l.leaseOf(ctx, held)
	if err != nil {
		return leases.Lease{}, fmt.Errorf("renew %q for %q: %w", held.Resource, held.Holder, boundEnded(ctx, err))
	}
	var resp *clientv3.LeaseKeepAliveResponse
	err = l.ask(ctx, func() (err error) {
		resp, err = l.store.client.KeepAliveOnce(ctx, id)
		return err
	})
	switch {
	case errors.Is(rpctypes.Error(err), rpctypes.ErrLeaseNotFound) || err == nil && resp.TTL <= 0:
		l.forget(held)
		return leases.Lease{}, fmt.Errorf("renew %q for %q: %w: epoch %d ran out or was released", held.Resource, held.Holder, leases.ErrLeaseExpired, held.Epoch)
	case err != nil:
		// The keep-alive may have reached the leader: the lease may have
		// been extended, or not. Either way it lasts no shorter.
		return leases.Lease{}, fmt.Errorf("renew %q for %q: %w", held.Resource, held.Holder, boundEnded(ctx, outcomeUnknown(ctx, err)))
	}
	now := time.Now().UnixMilli()
	held.ExpiresAt, held.Ticks = now+resp.TTL*1000, leases.LocalMillis
	return held, nil
}

// Release implements [leases.Lessor.Release]: the revocation of held's
// etcd lease, which deletes the holder key with it.
func (l *lessor) Release(ctx context.Context, held leases.Lease) error {
	if err := rules.CheckHeld(held, 0); err != nil {
		return err
	}
	ctx, cancel := l.store.bound(ctx)
	defer cancel()
	id, err := l.leaseOf(ctx, held)
	if err != nil {
		return fmt.Errorf("release %q for %q: %w", held.Resource, held.Holder, boundEnded(ctx, err))
	}
	err = l.ask(ctx, func() error {
		_, err := l.store.client.Revoke(ctx, id)
		return err
	})
	switch {
	case errors.Is(rpctypes.Error(err), rpctypes.ErrLeaseNotFound):
		l.forget(held)
		return fmt.Errorf("release %q for %q: %w: epoch %d ran out or was released", held.Resource, held.Holder, leases.ErrLeaseExpired, held.Epoch)
	case err != nil:
		return fmt.Errorf("release %q for %q: %w", held.Resource, held.Holder, boundEnded(ctx, outcomeUnknown(ctx, err)))
	}
	l.forget(held)
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

// leaseOf is the etcd lease of held: remembered from its grant in this
// process, or read from the holder key, which must be held's.
func (l *lessor) leaseOf(ctx context.Context, held leases.Lease) (clientv3.LeaseID, error) {
	l.mu.Lock()
	id, ok := l.ids[tenure{held.Resource, held.Holder, held.Epoch}]
	l.mu.Unlock()
	if ok {
		return id, nil
	}
	views, err := l.store.read(ctx, l.store.key(heldKind, held.Resource))
	if err != nil {
		return 0, outcome.BeforeCommit(ctx, err)
	}
	if !views[0].found() {
		return 0, fmt.Errorf("%w: epoch %d of %q ran out or was released", leases.ErrLeaseExpired, held.Epoch, held.Resource)
	}
	var record holdRecord
	if err := json.Unmarshal(views[0].value, &record); err != nil {
		return 0, outcome.BeforeCommit(ctx, fmt.Errorf("decode %s: %w", views[0].key, err))
	}
	if record.Holder != held.Holder || record.Epoch != held.Epoch {
		return 0, fmt.Errorf("%w: %q is held by %q at epoch %d, not by %q at epoch %d",
			leases.ErrNotHolder, held.Resource, record.Holder, record.Epoch, held.Holder, held.Epoch)
	}
	return clientv3.LeaseID(record.Lease), nil
}

func (l *lessor) remember(t tenure, id clientv3.LeaseID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.ids) >= maxCached {
		clear(l.ids) // a guess like any other: a later call reads the key
	}
	l.ids[t] = id
}

func (l *lessor) forget(held leases.Lease) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.ids, tenure{held.Resource, held.Holder, held.Epoch})
}

// decodeEpoch is the last epoch an epoch key holds, 0 when absent.
func decodeEpoch(v view) (int64, error) {
	if !v.found() {
		return 0, nil
	}
	epoch, err := strconv.ParseInt(string(v.value), 10, 64)
	if err != nil || epoch < 1 {
		return 0, fmt.Errorf("decode %s: %q is not an epoch", v.key, v.value)
	}
	return epoch, nil
}
