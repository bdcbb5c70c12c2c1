package etcd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"leases"
	"leases/internal/outcome"
)

// view is one key as a decision saw it, at a revision of the cluster.
type view struct {
	key   string
	value []byte // nil when the key is absent
	rev   int64  // the key's ModRevision; 0 when absent
}

func (v view) found() bool { return v.rev != 0 }

// unchanged is the compare that holds while the key is still as v saw it.
// Keys are never deleted, so an absent key is one never created.
func (v view) unchanged() clientv3.Cmp {
	if !v.found() {
		return clientv3.Compare(clientv3.CreateRevision(v.key), "=", 0)
	}
	return clientv3.Compare(clientv3.ModRevision(v.key), "=", v.rev)
}

// write is a value a decision stores.
type write struct {
	key   string
	value []byte
}

// decideFunc asks package rules what to do given views, one per key in the
// order asked for: the writes to commit (none for an outcome that changes
// nothing), or a refusal. A refusal with writes is a fence: the writes
// (each key's value as it stands) are committed and the refusal is the
// answer, so that a write of this store's whose outcome was unknown can
// no longer be applied after the refusal (see cache.doubted). Any other
// error (a stored value that does not decode) is a failure before commit.
// It may be called more than once, each time on newer views; only the
// last call's answer counts.
type decideFunc func(views []view) ([]write, error)

// decide makes one decision on keys and commits it with one transaction:
// If(every key unchanged since it was seen) Then(the writes) Else(Get every
// key). The first transaction goes out on the store's guess (cache.go). A
// lost compare means another writer came first; the decision is then
// made again on what the Else read, until it commits or the call ends.
//
// Its error is one of the three kinds documented in package leases:
//   - a refusal from decideFn, decided on what etcd held at one revision;
//   - a failure before commit: the call ended (its context, or the
//     store's CallTimeout) before the transaction was sent; or every
//     member it reached refused it for want of a leader, which a member
//     does on arrival, before anything is proposed (ErrNoLeader); or a
//     transaction that writes nothing failed (nothing changed);
//   - ErrOutcomeUnknown: a transaction with writes was sent and failed,
//     the call's bound included: etcd may have applied it.
//
// Asked again within the call: a transaction refused for want of a
// leader (nothing was proposed), and one that writes nothing and met a
// change of leader.
func (s *Store) decide(ctx context.Context, keys []string, decideFn decideFunc) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	return boundEnded(ctx, s.decideWithin(ctx, keys, decideFn))
}

// decideWithin is decide within the call's bound, ctx.
func (s *Store) decideWithin(ctx context.Context, keys []string, decideFn decideFunc) error {
	s.followOthers()
	views, current := s.cache.guess(keys), false
	var refusals retries
	for {
		writes, decision := decideFn(views)
		if decision != nil && !leases.IsRefusal(decision) {
			return outcome.BeforeCommit(ctx, decision)
		}
		if current && len(writes) == 0 {
			return decision // decided on a linearizable read: nothing to write
		}
		if ctx.Err() != nil {
			return outcome.BeforeCommit(ctx, errors.New("transaction not sent"))
		}
		resp, err := s.transaction(ctx, views, writes)
		switch {
		case noLeader(err):
			if err := refusals.wait(ctx, s.client); err != nil {
				return outcome.BeforeCommit(ctx, err)
			}
			continue
		case err != nil && len(writes) == 0 && leaderChanged(err) && ctx.Err() == nil:
			continue // it wrote nothing: ask again, of the new leader
		case err != nil && len(writes) == 0:
			return outcome.BeforeCommit(ctx, fmt.Errorf("read: %w", refusals.cut(ctx, err)))
		case err != nil:
			s.cache.forget(keys)
			s.cache.doubt(writes)
			return outcomeUnknown(ctx, err)
		}
		if resp.Succeeded {
			s.cache.remember(afterCommit(views, writes, resp.Header.Revision)...)
			s.cache.settle(writes)
			return decision
		}
		if views, err = viewsOf(keys, resp.Responses); err != nil {
			return outcome.BeforeCommit(ctx, err)
		}
		s.cache.remember(views...)
		current = true
	}
}

// transaction sends If(views unchanged) Then(writes) Else(Get keys).
//
// With no writes it is a read-only transaction, and etcd serves it as a
// linearizable read because of the Else's Gets: a read-only transaction
// without any Get would count as serializable and be answered from the
// member's local state (server/etcdserver/txn/txn.go, IsTxnSerializable).
func (s *Store) transaction(ctx context.Context, views []view, writes []write) (*clientv3.TxnResponse, error) {
	cmps := make([]clientv3.Cmp, len(views))
	gets := make([]clientv3.Op, len(views))
	for i, v := range views {
		cmps[i], gets[i] = v.unchanged(), clientv3.OpGet(v.key)
	}
	puts := make([]clientv3.Op, len(writes))
	for i, w := range writes {
		puts[i] = clientv3.OpPut(w.key, string(w.value))
	}
	return s.client.Txn(ctx).If(cmps...).Then(puts...).Else(gets...).Commit()
}

// read returns the current views of keys, all at one revision: one
// read-only transaction of Gets, served as a linearizable read, within
// the call's bound.
func (s *Store) read(ctx context.Context, keys ...string) ([]view, error) {
	views, _, err := s.readAt(ctx, keys...)
	return views, err
}

// readAt is read, and the revision of the cluster it read at.
func (s *Store) readAt(ctx context.Context, keys ...string) ([]view, int64, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	views, rev, err := s.readWithin(ctx, keys...)
	return views, rev, boundEnded(ctx, err)
}

// readWithin is readAt within the call's bound, ctx.
func (s *Store) readWithin(ctx context.Context, keys ...string) ([]view, int64, error) {
	gets := make([]clientv3.Op, len(keys))
	for i, key := range keys {
		gets[i] = clientv3.OpGet(key)
	}
	var refusals retries
	for {
		resp, err := s.client.Txn(ctx).Then(gets...).Commit()
		switch {
		case noLeader(err):
			if err := refusals.wait(ctx, s.client); err != nil {
				return nil, 0, fmt.Errorf("read: %w", outcome.WithContext(ctx, err))
			}
			continue
		case leaderChanged(err) && ctx.Err() == nil:
			// A read changes nothing: ask again. etcd's client retries
			// a read on its own, but not a transaction, even one that
			// only reads.
			continue
		case err != nil:
			return nil, 0, fmt.Errorf("read: %w", outcome.WithContext(ctx, refusals.cut(ctx, err)))
		}
		views, err := viewsOf(keys, resp.Responses)
		if err == nil {
			s.cache.remember(views...)
		}
		return views, resp.Header.Revision, err
	}
}

// put stores value at key unconditionally, with one transaction, within
// the call's bound.
func (s *Store) put(ctx context.Context, key string, value []byte) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	return boundEnded(ctx, s.putWithin(ctx, key, value))
}

// putWithin is put within the call's bound, ctx.
func (s *Store) putWithin(ctx context.Context, key string, value []byte) error {
	var refusals retries
	for {
		if ctx.Err() != nil {
			return outcome.BeforeCommit(ctx, errors.New("transaction not sent"))
		}
		_, err := s.client.Put(ctx, key, string(value))
		switch {
		case noLeader(err):
			if err := refusals.wait(ctx, s.client); err != nil {
				return outcome.BeforeCommit(ctx, err)
			}
			continue
		case err != nil:
			return outcomeUnknown(ctx, err)
		}
		return nil
	}
}

// boundEnded makes err, a failure of a call whose bound (ErrCallTimeout)
// ended it, say so: etcd's client answers a call whose context ended with
// the context's error alone, context.DeadlineExceeded, which does not
// tell the store's bound from the caller's deadline; and the member,
// which has the bound from gRPC's timeout, may answer at the bound with
// its own "request timed out" before the bound's timer has fired here
// (outcome.Ended waits for it).
func boundEnded(ctx context.Context, err error) error {
	if err == nil || leases.IsRefusal(err) || !outcome.Ended(ctx) || !errors.Is(context.Cause(ctx), ErrCallTimeout) || errors.Is(err, ErrCallTimeout) {
		return err
	}
	return fmt.Errorf("%w (%w)", err, ErrCallTimeout)
}

// retries paces the requests a call sends again after members refused
// them for want of a leader. The client sends each request to the next
// member in turn, so the first tries go at once, one per member; after
// that every member has refused, the cluster is electing a leader or has
// lost its quorum, and asking at once again would only load it: the
// call waits, a little longer each time, until its bound.
type retries struct{ refused int }

// firstWait and maxWait bound the wait between tries once every member
// has refused: from a heartbeat of etcd's default (100 ms) down to a
// tenth of it, so that a leader elected meanwhile is found quickly.
const (
	firstWait = 10 * time.Millisecond
	maxWait   = 100 * time.Millisecond
)

// wait returns once the request may go again, or the error to end the
// call with: ErrNoLeader, with the context's end, when ctx ends first.
func (r *retries) wait(ctx context.Context, client *clientv3.Client) error {
	ended := fmt.Errorf("%w: every member the call reached refused it", ErrNoLeader)
	if ctx.Err() != nil {
		return ended
	}
	r.refused++
	n := len(client.Endpoints())
	if r.refused < n {
		return nil
	}
	timer := time.NewTimer(min(maxWait, firstWait<<min(r.refused-n, 4)))
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ended
	}
}

// cut is the error of a read whose call ended while it was asked again
// after members had refused it for want of a leader: the refusals are
// what the call met, and the bound only ended the last try. Without
// this, whether such a read names ErrNoLeader would depend on whether
// the bound fell during a wait between tries or during a try. A write
// cut off on its way is another matter: it is an unknown outcome
// whatever came before, since a leader may have been elected meanwhile.
func (r *retries) cut(ctx context.Context, err error) error {
	if r.refused == 0 || !outcome.Ended(ctx) {
		return err
	}
	return fmt.Errorf("%w: every member the call reached refused it, and its last try was cut off: %w", ErrNoLeader, err)
}

// outcomeUnknown is the error of a write that etcd may have applied: it
// failed after it was sent (a timeout, a lost leader), so whether it took
// effect is unknown (Jepsen's indeterminate results).
func outcomeUnknown(ctx context.Context, err error) error {
	return outcome.Unknown(ctx, fmt.Errorf("transaction failed: %w", err))
}

// viewsOf turns the responses of one Get per key into views.
func viewsOf(keys []string, responses []*etcdserverpb.ResponseOp) ([]view, error) {
	if len(responses) != len(keys) {
		return nil, fmt.Errorf("read %d keys, got %d responses", len(keys), len(responses))
	}
	views := make([]view, len(keys))
	for i, key := range keys {
		views[i] = view{key: key}
		kvs := responses[i].GetResponseRange().GetKvs()
		if len(kvs) > 0 {
			views[i].value, views[i].rev = kvs[0].Value, kvs[0].ModRevision
		}
	}
	return views, nil
}

// afterCommit is what views and writes leave at revision rev: every key
// written has its new value at rev; every other key was proved unchanged.
func afterCommit(views []view, writes []write, rev int64) []view {
	after := append([]view(nil), views...)
	for _, w := range writes {
		for i := range after {
			if after[i].key == w.key {
				after[i] = view{key: w.key, value: w.value, rev: rev}
			}
		}
	}
	return after
}

// noLeader reports whether err is a member's refusal of a request that
// requires a leader, when it has none: the request was refused on
// arrival (etcd's v3rpc interceptor), before anything was proposed.
func noLeader(err error) bool {
	return errors.Is(rpctypes.Error(err), rpctypes.ErrNoLeader)
}

// leaderChanged reports whether err is etcd's answer to a request that
// was in flight, or not yet servable, while the cluster changed leader.
// For a transaction that writes, it is an unknown outcome (the proposal
// may have been committed); for one that only reads, it is a reason to
// ask again.
func leaderChanged(err error) bool {
	return errors.Is(rpctypes.Error(err), rpctypes.ErrLeaderChanged)
}
