package etcd

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"leases"
	"leases/internal/rules"
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
// nothing), or a refusal. Any other error (a stored value that does not
// decode) is a failure before commit. It may be called more than once,
// each time on newer views; only the last call's answer counts.
type decideFunc func(views []view) ([]write, error)

// decide makes one decision on keys and commits it with one transaction:
// If(every key unchanged since it was seen) Then(the writes) Else(Get every
// key). A lost compare means another writer came first; the decision is
// then made again on what the Else read, until it commits or ctx ends.
//
// Its error is one of the three kinds documented in package leases: a
// refusal from decideFn, decided on what etcd held at one revision; a
// failure before the transaction was sent, or of a transaction that
// writes nothing (nothing changed); or ErrOutcomeUnknown when a
// transaction with writes was sent and failed: etcd may have applied it.
func (s *Store) decide(ctx context.Context, keys []string, decideFn decideFunc) error {
	views, current, err := s.start(ctx, keys)
	if err != nil {
		return rules.BeforeCommit(ctx, err)
	}
	for {
		writes, decision := decideFn(views)
		if decision != nil && !leases.IsRefusal(decision) {
			return rules.BeforeCommit(ctx, decision)
		}
		if current && (decision != nil || len(writes) == 0) {
			return decision // decided on a linearizable read: nothing to write
		}
		if ctx.Err() != nil {
			return rules.BeforeCommit(ctx, errors.New("transaction not sent"))
		}
		resp, err := s.transaction(ctx, views, writes)
		if len(writes) == 0 && leaderChanged(err) && ctx.Err() == nil {
			continue // it wrote nothing: ask again, of the new leader
		}
		if err != nil {
			s.cache.forget(keys)
			if len(writes) == 0 {
				return rules.BeforeCommit(ctx, fmt.Errorf("read: %w", err))
			}
			return outcomeUnknown(ctx, err)
		}
		if resp.Succeeded {
			s.cache.remember(afterCommit(views, writes, resp.Header.Revision)...)
			return decision
		}
		if views, err = viewsOf(keys, resp.Responses); err != nil {
			return rules.BeforeCommit(ctx, err)
		}
		s.cache.remember(views...)
		current = true
	}
}

// start returns the views the first decision is made on, and whether they
// are current (read from etcd) rather than guessed (from the cache).
func (s *Store) start(ctx context.Context, keys []string) (views []view, current bool, err error) {
	if s.optimistic {
		return s.cache.guess(keys), false, nil
	}
	views, err = s.read(ctx, keys...)
	return views, err == nil, err
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
// read-only transaction of Gets, served as a linearizable read.
func (s *Store) read(ctx context.Context, keys ...string) ([]view, error) {
	gets := make([]clientv3.Op, len(keys))
	for i, key := range keys {
		gets[i] = clientv3.OpGet(key)
	}
	resp, err := s.client.Txn(ctx).Then(gets...).Commit()
	for leaderChanged(err) && ctx.Err() == nil {
		// A read changes nothing: ask again. etcd's client retries a
		// read on its own, but not a transaction, even one that only
		// reads.
		resp, err = s.client.Txn(ctx).Then(gets...).Commit()
	}
	if err != nil {
		return nil, fmt.Errorf("read: %w", rules.WithContext(ctx, err))
	}
	views, err := viewsOf(keys, resp.Responses)
	if err == nil {
		s.cache.remember(views...)
	}
	return views, err
}

// put stores value at key unconditionally, with one transaction.
func (s *Store) put(ctx context.Context, key string, value []byte) error {
	if ctx.Err() != nil {
		return rules.BeforeCommit(ctx, errors.New("transaction not sent"))
	}
	if _, err := s.client.Put(ctx, key, string(value)); err != nil {
		return outcomeUnknown(ctx, err)
	}
	return nil
}

// outcomeUnknown is the error of a write that etcd may have applied: it
// failed after it was sent (a timeout, a lost leader), so whether it took
// effect is unknown (Jepsen's indeterminate results).
func outcomeUnknown(ctx context.Context, err error) error {
	return fmt.Errorf("%w: transaction failed: %w", leases.ErrOutcomeUnknown, rules.WithContext(ctx, err))
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

// leaderChanged reports whether err is etcd's answer to a request that
// was in flight, or not yet servable, while the cluster changed leader.
// For a transaction that writes, it is an unknown outcome (the proposal
// may have been committed); for one that only reads, it is a reason to
// ask again.
func leaderChanged(err error) bool {
	return errors.Is(rpctypes.Error(err), rpctypes.ErrLeaderChanged)
}
