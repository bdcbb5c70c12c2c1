package etcdbackend

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// explorable is a store whose snapshot is every key under its prefix with
// its value, in key order: two snapshots are equal exactly when the keys
// and values are, whatever their revisions.
//
// Its reads are serializable, answered by the member from what it has
// applied, without the round of heartbeats a linearizable read costs: its
// client talks to one member (the leader, see Explorable), which answers
// every write of this store only once it has applied it, and nothing else
// writes under the prefix while the explorer runs, so what it has applied
// is everything there is.
//
// For the same reason it need not ask what it already knows: the explorer
// snapshots after every step, and most steps write nothing (a tick, a
// refusal, a stale write, a read). While no request of its client has
// written, or may have, since the last Snapshot or Restore (writes), the
// keys are what that call saw or made, and Snapshot answers from them
// without a round trip; Restore sends its transaction on them without
// reading the keys first, and the transaction itself checks that they are
// still current (known). Counted on the command's etcd exploration: 810
// requests to the leader, one after another, became about 540 (429 reads
// became 157; each restore is one transaction, not a read and one).
type explorable struct {
	clientStore
	prefix string
	writes *writeWatch
	known  known
}

// known is what the store held after the last Snapshot or Restore: its
// snapshot, its keys, the revision at which they were read or written,
// and how many writes its client had noted then.
type known struct {
	valid    bool
	snapshot []byte
	keys     []string // whole keys, prefix included
	revision int64
	writes   uint64
}

// current reports whether the store still holds what is known: nothing
// has written, or may have, since.
func (e *explorable) current() bool { return e.known.valid && e.writes.count() == e.known.writes }

// newExplorable is the explorable store on prefix of client, which it
// closes when it closes; client talks to one member.
func newExplorable(client *clientv3.Client, prefix string) *explorable {
	w := &writeWatch{KV: client.KV}
	client.KV = w // the store's every read and write passes w
	return &explorable{clientStore: newClientStore(client, prefix), prefix: prefix, writes: w}
}

// Snapshot implements backend.Rewindable.
func (e *explorable) Snapshot(ctx context.Context) ([]byte, error) {
	if e.current() {
		return bytes.Clone(e.known.snapshot), nil
	}
	e.known.valid = false
	writes := e.writes.count()
	resp, err := e.client.Get(ctx, e.prefix, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend), clientv3.WithSerializable())
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	pairs := make([][2]string, len(resp.Kvs))
	keys := make([]string, len(resp.Kvs))
	for i, kv := range resp.Kvs {
		keys[i] = string(kv.Key)
		pairs[i] = [2]string{strings.TrimPrefix(keys[i], e.prefix), string(kv.Value)}
	}
	snapshot, err := json.Marshal(pairs)
	if err != nil {
		return nil, err
	}
	e.remember(snapshot, keys, resp.Header.Revision, writes)
	return bytes.Clone(snapshot), nil
}

// remember records what the store holds now, as of revision; the caller
// has just read or written it, and nothing else has written since.
func (e *explorable) remember(snapshot []byte, keys []string, revision int64, writes uint64) {
	e.known = known{valid: true, snapshot: snapshot, keys: keys, revision: revision, writes: writes}
}

// Restore makes the keys under the prefix those of the snapshot, in one
// transaction: it deletes the keys the snapshot lacks (etcd refuses a
// transaction whose delete and put touch one key) and puts the others.
// Where the store's keys are known (see explorable), the transaction
// carries them as its condition: no key under the prefix has changed
// since the revision they are known at. When that fails, its Else reads
// the keys, and a second transaction restores on those.
//
// A transaction the server timed out ("request timed out": on a loaded
// machine the members' disks or CPUs can take longer than etcd's request
// timeout) may or may not have been applied; restoring again from what
// is there then is the same restore, so it is tried again. The explorer
// restores thousands of times a run: the one call where an overloaded
// machine is most likely to meet the timeout.
func (e *explorable) Restore(ctx context.Context, snapshot []byte) error {
	var pairs [][2]string
	if err := json.Unmarshal(snapshot, &pairs); err != nil {
		return fmt.Errorf("restore: not a snapshot: %w", err)
	}
	keys := make([]string, len(pairs))
	for i, kv := range pairs {
		keys[i] = e.prefix + kv[0]
	}
	for {
		revision, err := e.restore(ctx, pairs)
		if err == nil {
			// The restore's own transaction was noted as a write: what
			// is known starts after it.
			e.remember(bytes.Clone(snapshot), keys, revision, e.writes.count())
			return nil
		}
		if ctx.Err() != nil || !errors.Is(rpctypes.Error(err), rpctypes.ErrTimeout) {
			return fmt.Errorf("restore: %w", err)
		}
	}
}

// restore is one try of Restore; it returns the revision the store is
// restored at.
func (e *explorable) restore(ctx context.Context, pairs [][2]string) (int64, error) {
	was, current := e.known, e.current()
	e.known.valid = false // until this try is known to have done its work
	if current {
		unchanged := clientv3.Compare(clientv3.ModRevision(e.prefix), "<", was.revision+1).WithPrefix()
		resp, err := e.client.Txn(ctx).If(unchanged).Then(e.restoreOps(pairs, was.keys)...).
			Else(clientv3.OpGet(e.prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())).Commit()
		if err != nil {
			return 0, err
		}
		if resp.Succeeded {
			return resp.Header.Revision, nil
		}
		return e.restoreOn(ctx, pairs, resp.Responses[0].GetResponseRange().Kvs)
	}
	now, err := e.client.Get(ctx, e.prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithSerializable())
	if err != nil {
		return 0, err
	}
	return e.restoreOn(ctx, pairs, now.Kvs)
}

// restoreOn restores pairs on a store that holds the keys of now.
func (e *explorable) restoreOn(ctx context.Context, pairs [][2]string, now []*mvccpb.KeyValue) (int64, error) {
	keys := make([]string, len(now))
	for i, kv := range now {
		keys[i] = string(kv.Key)
	}
	resp, err := e.client.Txn(ctx).Then(e.restoreOps(pairs, keys)...).Commit()
	if err != nil {
		return 0, err
	}
	return resp.Header.Revision, nil
}

// restoreOps are the puts of pairs and the deletes of the keys of now
// that pairs lack.
func (e *explorable) restoreOps(pairs [][2]string, now []string) []clientv3.Op {
	keep := map[string]bool{}
	var ops []clientv3.Op
	for _, kv := range pairs {
		keep[e.prefix+kv[0]] = true
		ops = append(ops, clientv3.OpPut(e.prefix+kv[0], kv[1]))
	}
	for _, key := range now {
		if !keep[key] {
			ops = append(ops, clientv3.OpDelete(key))
		}
	}
	return ops
}

// writeWatch is a client's KV that counts the requests that wrote, or
// may have: a put, a delete, a compaction, a request that failed, a
// transaction whose branch that ran, or might have, holds a put or a
// delete.
type writeWatch struct {
	clientv3.KV
	writes atomic.Uint64
}

func (w *writeWatch) mark() { w.writes.Add(1) }

// count is how many requests wrote, or may have, so far.
func (w *writeWatch) count() uint64 { return w.writes.Load() }

func (w *writeWatch) Put(ctx context.Context, key, val string, opts ...clientv3.OpOption) (*clientv3.PutResponse, error) {
	defer w.mark()
	return w.KV.Put(ctx, key, val, opts...)
}

func (w *writeWatch) Delete(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.DeleteResponse, error) {
	defer w.mark()
	return w.KV.Delete(ctx, key, opts...)
}

func (w *writeWatch) Compact(ctx context.Context, rev int64, opts ...clientv3.CompactOption) (*clientv3.CompactResponse, error) {
	defer w.mark()
	return w.KV.Compact(ctx, rev, opts...)
}

func (w *writeWatch) Do(ctx context.Context, op clientv3.Op) (clientv3.OpResponse, error) {
	if writes(op) {
		defer w.mark()
	}
	return w.KV.Do(ctx, op)
}

func (w *writeWatch) Txn(ctx context.Context) clientv3.Txn {
	return &watchedTxn{Txn: w.KV.Txn(ctx), watch: w}
}

// watchedTxn is a transaction of a writeWatch.
type watchedTxn struct {
	clientv3.Txn
	watch                  *writeWatch
	thenWrites, elseWrites bool
}

func (t *watchedTxn) If(cs ...clientv3.Cmp) clientv3.Txn {
	t.Txn = t.Txn.If(cs...)
	return t
}

func (t *watchedTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	t.thenWrites = t.thenWrites || writes(ops...)
	t.Txn = t.Txn.Then(ops...)
	return t
}

func (t *watchedTxn) Else(ops ...clientv3.Op) clientv3.Txn {
	t.elseWrites = t.elseWrites || writes(ops...)
	t.Txn = t.Txn.Else(ops...)
	return t
}

func (t *watchedTxn) Commit() (*clientv3.TxnResponse, error) {
	resp, err := t.Txn.Commit()
	switch {
	case err != nil:
		if t.thenWrites || t.elseWrites {
			t.watch.mark()
		}
	case resp.Succeeded && t.thenWrites, !resp.Succeeded && t.elseWrites:
		t.watch.mark()
	}
	return resp, err
}

// writes reports whether any of ops writes, or may (a transaction).
func writes(ops ...clientv3.Op) bool {
	for _, op := range ops {
		if op.IsPut() || op.IsDelete() || op.IsTxn() {
			return true
		}
	}
	return false
}
