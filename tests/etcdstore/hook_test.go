package etcdstore_test

import (
	"context"
	"sync/atomic"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// hookedKV is a client's KV whose next transaction, once a hook is set,
// commits through the hook instead, once: a test ends the call's context
// at the moment the transaction is handed to etcd's client, pauses the
// member first, or keeps the transaction to send later.
type hookedKV struct {
	clientv3.KV
	hook atomic.Pointer[func(*hookedTxn) (*clientv3.TxnResponse, error)]
}

// onCommit sets the hook for the next transaction's Commit.
func (k *hookedKV) onCommit(hook func(*hookedTxn) (*clientv3.TxnResponse, error)) {
	k.hook.Store(&hook)
}

func (k *hookedKV) Txn(ctx context.Context) clientv3.Txn {
	return &hookedTxn{Txn: k.KV.Txn(ctx), ctx: ctx, kv: k}
}

// hookedTxn is a transaction of a hookedKV, which remembers what it is
// made of so that it can be made again (again).
type hookedTxn struct {
	clientv3.Txn
	ctx              context.Context // the call's
	kv               *hookedKV
	cmps             []clientv3.Cmp
	thens, otherwise []clientv3.Op
}

func (t *hookedTxn) If(cs ...clientv3.Cmp) clientv3.Txn {
	t.Txn, t.cmps = t.Txn.If(cs...), append(t.cmps, cs...)
	return t
}

func (t *hookedTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	t.Txn, t.thens = t.Txn.Then(ops...), append(t.thens, ops...)
	return t
}

func (t *hookedTxn) Else(ops ...clientv3.Op) clientv3.Txn {
	t.Txn, t.otherwise = t.Txn.Else(ops...), append(t.otherwise, ops...)
	return t
}

func (t *hookedTxn) Commit() (*clientv3.TxnResponse, error) {
	if hook := t.kv.hook.Swap(nil); hook != nil {
		return (*hook)(t)
	}
	return t.Txn.Commit()
}

// again is the same transaction under ctx, to send later.
func (t *hookedTxn) again(ctx context.Context) clientv3.Txn {
	return t.kv.KV.Txn(ctx).If(t.cmps...).Then(t.thens...).Else(t.otherwise...)
}
