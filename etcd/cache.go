package etcd

import (
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// cache remembers, per key, the last value and revision this store saw:
// written by its own transactions or returned by their reads. It is a
// guess and nothing more.
//
// Why have it: a decision needs the key's current value. Reading it first
// and then sending the transaction costs two round trips to the leader.
// With a guess, the transaction goes at once: If(ModRevision == guessed
// revision) Then(Put the decision) Else(Get the key). While the guess is
// right (this process was the last to change the key, the common case for
// a lease holder renewing, releasing or writing) that is one round trip;
// when it is wrong, the compare fails, nothing is written, the Else
// returns the current value, and the decision is made again on it: two
// round trips, as a read would have cost.
//
// Other processes' writes: a watch on the store's prefix (watch.go,
// followOthers) updates the guesses of keys this process has seen, so
// that a waiter acquiring right after another process's release also goes
// out in one round trip. Measured (BenchmarkAcquireAfterAnotherProcess in
// tests/etcdstore, three runs against the bare put at load 8.8): 1.09x to
// 1.34x with the watch, 2.31x to 2.44x without.
//
// What keeps it safe: no answer ever rests on the guess alone. A write is
// committed only if the compare proves the guess current at the
// transaction's revision. A refusal, or an outcome that writes nothing
// (replay, conflict, stale, not-live), is confirmed by a transaction with
// the same compare and no write (If(...) Else(Get)): if the guess was
// stale the Else brings the current value and the decision is made again.
// So every answer is decided on the value the key had at one revision of
// the cluster, exactly as with a read before the transaction. (A refusal
// on a key whose last write by this store had an unknown outcome is
// confirmed with the key written again as it stands, under the same
// compare: see doubted.)
//
// Measured (tests/etcdstore/bench_test.go, when the three members still
// ran in one process, on a shared two-core machine, each call timed
// against a bare one-key Txn put in alternation; medians of three runs of
// 400 calls): with the cache,
// Acquire 1.09x the bare put, Renew 0.87x, fenced Write 1.05x, Release
// 1.78x and guarded Write 1.40x (both timed right after an untimed
// Acquire of the same key, and still one transaction each: counted);
// reading first, 1.84x to 2.10x for every one of them. Acquire+Release is
// 1.08x etcd's Mutex Lock+Unlock on one session (1.74x reading first) and
// 0.65x with a session per lock. Kept: one round trip instead of two, and
// correct by the argument above.
type cache struct {
	mu   sync.Mutex
	seen map[string]view
	// doubted are the keys whose last write by this store had an unknown
	// outcome, until a later write of the store's own to the key commits:
	// that write may still be applied after a read said it was not (a
	// member that was paused with the request queued proposes it when it
	// continues, although the client gave up on it). See decideFunc.
	doubted map[string]bool
}

// maxCached bounds the cache: a process that touches many resources keeps
// guesses only for some of them, and pays a second round trip for others.
const maxCached = 4096

// guess returns the cached view of each key, or an absent one.
func (c *cache) guess(keys []string) []view {
	c.mu.Lock()
	defer c.mu.Unlock()
	views := make([]view, len(keys))
	for i, key := range keys {
		if v, ok := c.seen[key]; ok {
			views[i] = v
		} else {
			views[i] = view{key: key}
		}
	}
	return views
}

// remember keeps views that are current at their revision, unless a newer
// one is kept already (two calls of this store may finish out of order).
func (c *cache) remember(views ...view) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = map[string]view{}
	}
	for _, v := range views {
		if v.rev == 0 || c.seen[v.key].rev >= v.rev {
			continue // absent keys are the default guess already
		}
		if _, ok := c.seen[v.key]; !ok && len(c.seen) >= maxCached {
			for old := range c.seen { // any one: the map's order is random
				delete(c.seen, old)
				break
			}
		}
		c.seen[v.key] = v
	}
}

// follow keeps the guesses of keys already seen up to date with what
// other processes write (ev, an event of a watch on the store's prefix):
// a put becomes the new guess, a delete drops the guess (an absent key is
// the default guess). Keys never seen are left alone, so the cache stays
// bounded by what this process has asked about; an event older than the
// guess is ignored.
func (c *cache) follow(ev *clientv3.Event) {
	key := string(ev.Kv.Key)
	c.mu.Lock()
	defer c.mu.Unlock()
	seen, ok := c.seen[key]
	if !ok || seen.rev >= ev.Kv.ModRevision {
		return
	}
	if ev.Type == clientv3.EventTypeDelete {
		delete(c.seen, key)
		return
	}
	c.seen[key] = view{key: key, value: ev.Kv.Value, rev: ev.Kv.ModRevision}
}

// forget drops the guesses for keys, after a transaction whose outcome is
// unknown.
func (c *cache) forget(keys []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, key := range keys {
		delete(c.seen, key)
	}
}

// doubt marks the keys of writes, sent in a transaction whose outcome is
// unknown, as in doubt.
func (c *cache) doubt(writes []write) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.doubted == nil {
		c.doubted = map[string]bool{}
	}
	for _, w := range writes {
		c.doubted[w.key] = true
	}
}

// settle ends the doubt on the keys of writes, committed by this store:
// a write in doubt compared an older revision of its key, and can no
// longer be applied.
func (c *cache) settle(writes []write) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range writes {
		delete(c.doubted, w.key)
	}
}

// inDoubt reports whether key's last write by this store had an unknown
// outcome that no later write of its own has settled.
func (c *cache) inDoubt(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.doubted[key]
}
