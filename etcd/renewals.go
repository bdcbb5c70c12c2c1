package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"leases"
	"leases/internal/batch"
	"leases/internal/outcome"
)

// The Lessor's tenures share etcd leases, as etcd's own
// concurrency.Session does: one etcd lease per (Lessor, TTL in whole
// seconds), to which every holder key of that TTL granted by this Lessor
// is attached, renewed by one keep-alive for all of them. Renewing L
// leases costs one keep-alive per batch, not L.
//
// What makes it safe: a holder counts its lease from when it sent its
// request, and the shared etcd lease lives a whole TTL from when etcd's
// leader received a keep-alive. So a call (Acquire, Renew) is answered
// only by a keep-alive, or a grant, sent after the call began: it joins
// the next batch, never one already in flight (keepAlive), and then the
// etcd lease outlives what the caller believes. A keep-alive that came
// later than the call only makes the lease last longer.
//
// What sharing changes: a holder key lives as long as its process keeps
// the shared etcd lease alive, not as long as its own holder renews. So
// the Lessor deletes the key of a tenure whose own deadline (a TTL from
// the start of its last answered call) has passed (reap), and a release
// deletes the tenure's key, in a transaction that compares it is this
// tenure's, instead of revoking an etcd lease. If that delete fails, the
// key lives on until the shared lease ends: a resource held longer than
// needed, never two holders. And a process that is paused longer than a
// TTL loses all of its tenures of that TTL at once, as a Session's
// mutexes are all lost with its one lease.
//
// And a keep-alive renews every key attached to the shared lease, also
// the key of a tenure that ended elsewhere (a release from another
// process deleted it, the reaper did): so a renewal is answered "held"
// only if its key, after its batch's keep-alive was answered, is still
// its tenure's (holder, epoch, etcd lease). Two ways to learn that:
//
// Reads, for a batch of up to watchedAbove (2*heldPerRead) renewals: the
// batch reads its renewals' keys at once, in transactions of up to
// heldPerRead Gets sent together: one keep-alive and n/heldPerRead
// reads, not n. A Range over the holder prefix would be one request, but
// it returns every holder key of every process (all L leases, to each of
// P processes, every round), where the Gets return only the batch's own.
//
// The watch, for a larger batch (owners.go): the Lessor keeps one watch
// on the holder prefix, from the revision after a linearizable read, and
// the last event on each of its tenures' keys. After the keep-alive was
// answered, the batch makes one linearizable read (a barrier: its
// revision R is at or above every write acknowledged before it), and
// waits until the watch has delivered every event up to R (a progress
// notification of R or more: etcd's member sends one, when asked, only
// once every event up to its revision is sent on the stream). A key is
// then its tenure's if it was at a revision the watch covers from (the
// grant's, or a read's of a batch, at or after the watch's start) and no
// event since left it otherwise: deleted, or put with another tenure's
// record (a later grant of the resource, here or elsewhere: compared as
// the reads compare it, heldBy). That is what a read at R or later would
// have found, in three requests (keep-alive, barrier, progress) whatever
// n: cheaper than the reads only above 2*heldPerRead. The keep-alive's
// own header revision is no barrier: the member that got it fills it in
// from its own store, which may lag (etcdserver/api/v3rpc/lease.go).
// Any doubt (the watch not started yet, broken, canceled, compacted, for
// want of a leader; a key the watch does not know; the wait's bound) and
// the batch reads, as a small one does: the reads stay the correctness
// path, and a batch that finds the watch off starts it again first, so
// that its reads make the keys known to the new watch. The cost besides:
// every process's watch gets the events of every holder key (grants,
// releases, expiries), a message per write, not per round.
// sharedLease is one etcd lease shared by the tenures of one TTL.
type sharedLease struct {
	seconds int64
	ready   chan struct{} // closed once the grant answered: id, ttl and err are set
	id      clientv3.LeaseID
	ttl     int64 // the time-to-live etcd granted, in seconds
	err     error
	users   int // tenures and acquires using it; revoked at 0
}

// held is a tenure granted by this Lessor: its shared lease, and the
// timer that deletes its key at its own deadline.
type heldTenure struct {
	shared   *sharedLease
	ttl      time.Duration // the grant's
	deadline time.Time     // a TTL from the start of its last answered call
	reaper   *time.Timer
	// known is a revision at which its key was this tenure's (its
	// grant's, or a batch's read of it), 0 when none is known: the
	// watch knows the key from there on (owners.go).
	known int64
}

// heldPerRead bounds the holder keys one read of a batch asks for: etcd
// refuses a transaction of more than 128 operations by default
// (--max-txn-ops).
const heldPerRead = 128

// keepAlives is the next keep-alive of one etcd lease and the calls
// waiting for it.
type keepAlives struct {
	waiting []waiter
}

// waiter is a call waiting for a batch: a grant, or a renewal of the
// tenure renews, whose key the batch reads after its keep-alive.
type waiter struct {
	answer chan keepAliveAnswer
	renews *leases.Lease // nil for a grant
}

type keepAliveAnswer struct {
	resp *clientv3.LeaseKeepAliveResponse
	err  error
	held bool // a renewal's: its key, read after resp came, is its tenure's
}

// keepAlive sends one keep-alive of id, together with every other call
// waiting for one of id, and only in a batch taken after the call began:
// the call waits for the batch in flight, if any, to be answered first.
// For a renewal (renews not nil), the answer says whether its key was
// still its tenure's after the keep-alive.
func (l *lessor) keepAlive(ctx context.Context, id clientv3.LeaseID, renews *leases.Lease) keepAliveAnswer {
	return l.await(ctx, l.join(id, renews))
}

// join puts a call in the next batch of keep-alives of id, and starts
// sending when none is in flight.
func (l *lessor) join(id clientv3.LeaseID, renews *leases.Lease) <-chan keepAliveAnswer {
	answer := make(chan keepAliveAnswer, 1)
	l.mu.Lock()
	b, sending := l.batches[id]
	if !sending {
		b = &keepAlives{}
		l.batches[id] = b
	}
	b.waiting = append(b.waiting, waiter{answer, renews})
	l.mu.Unlock()
	if !sending {
		go l.send(id, b)
	}
	return answer
}

// await is the answer of the batch a call joined, or the end of ctx.
func (l *lessor) await(ctx context.Context, answer <-chan keepAliveAnswer) keepAliveAnswer {
	select {
	case a := <-answer:
		return a
	case <-ctx.Done():
		return keepAliveAnswer{err: context.Cause(ctx)}
	}
}

// send sends keep-alives of id while calls wait for one, each for the
// calls that were waiting when it was taken (group commit: the calls
// that come while one is in flight go in the next).
func (l *lessor) send(id clientv3.LeaseID, b *keepAlives) {
	batch.Gather(func() int {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(b.waiting)
	})
	for {
		l.mu.Lock()
		waiting := b.waiting
		b.waiting = nil
		if len(waiting) == 0 {
			delete(l.batches, id)
			l.mu.Unlock()
			return
		}
		l.mu.Unlock()
		ctx, cancel := l.store.bound(context.Background())
		var a keepAliveAnswer
		a.err = l.ask(ctx, func() (err error) {
			a.resp, err = l.keepAliveOnce(ctx, id)
			return err
		})
		cancel()
		l.answer(id, waiting, a)
	}
}

// answer gives a batch's calls the answer a of its keep-alive of id: a
// grant at once; a renewal once it is known whether its key, after a
// came, is still its tenure's: from the watch, for a large batch (watched),
// or read. A read that fails leaves its renewals' outcome unknown.
func (l *lessor) answer(id clientv3.LeaseID, waiting []waiter, a keepAliveAnswer) {
	var renewals []waiter
	for _, w := range waiting {
		if w.renews == nil || a.err != nil || leaseEnded(a.resp, nil) {
			w.answer <- a
		} else {
			renewals = append(renewals, w)
		}
	}
	if len(renewals) > watchedAbove {
		renewals = l.watched(id, renewals, a)
	}
	var reads sync.WaitGroup // the chunks are read at once; the next batch waits for them
	for chunk := range slices.Chunk(renewals, heldPerRead) {
		reads.Go(func() {
			keys := make([]string, len(chunk))
			for i, w := range chunk {
				keys[i] = l.store.key(heldKind, w.renews.Resource)
			}
			views, rev, err := l.readHeld(context.Background(), keys...)
			for i, w := range chunk {
				renewed := a
				if renewed.err = err; err == nil {
					renewed.held, renewed.err = heldBy(views[i], *w.renews, id)
				}
				if renewed.held {
					l.known(*w.renews, rev)
				}
				w.answer <- renewed
			}
		})
	}
	reads.Wait()
}

// watchedAbove is the size of a batch above which the watch answers it:
// the watch costs the batch two requests beside its keep-alive (the
// barrier read and a progress request), the reads one per heldPerRead
// keys, so the watch is cheaper only above 2*heldPerRead renewals; at or
// below, the reads, which wait for no notification, answer.
const watchedAbove = 2 * heldPerRead

// watched answers those of a batch's renewals whose keys the watch knows,
// and returns the others, for answer to read. After the keep-alive was
// answered, one linearizable read gives a revision at or above every
// write acknowledged before it; once the watch has delivered every event
// up to that revision, a renewal's key is its tenure's if it was at a
// revision the watch covers from (its grant, or a read of it, at or
// after the revision the watch started from) and no event since says
// otherwise. (The keep-alive's own header revision would not do: the
// member that received it fills it in, from its own store, which may lag
// behind the leader's.) The watch off, or any doubt: all are returned,
// and a watch that is off is started, first, so that the reads that
// follow make their keys known to it.
func (l *lessor) watched(id clientv3.LeaseID, renewals []waiter, a keepAliveAnswer) []waiter {
	ctx, cancel := l.store.bound(context.Background())
	defer cancel()
	if !l.owners.on() {
		l.owners.start(ctx)
		return renewals
	}
	rev, err := l.owners.barrier(ctx)
	if err != nil {
		return renewals
	}
	// The tenures' revisions at which their keys were known theirs; 0:
	// not known, or no longer a tenure of this Lessor.
	known := make([]int64, len(renewals))
	gone := make([]bool, len(renewals))
	l.mu.Lock()
	for i, w := range renewals {
		if h := l.tenures[tenure{w.renews.Resource, w.renews.Holder, w.renews.Epoch}]; h != nil {
			known[i] = h.known
		} else {
			gone[i] = true
		}
	}
	l.mu.Unlock()
	var unknown []waiter
	answered := l.owners.upTo(ctx, rev, func(from int64, keys map[string]*lastEvent) {
		for i, w := range renewals {
			renewed := a
			if gone[i] { // released or reaped here meanwhile: Renew refuses it
				w.answer <- renewed
				continue
			}
			e := keys[l.store.key(heldKind, w.renews.Resource)]
			at := known[i]
			if e != nil && e.rev > at {
				at = e.rev
			}
			if e == nil || at == 0 || at < from-1 { // not known at a revision the watch covers from
				unknown = append(unknown, w)
				continue
			}
			renewed.held = true
			if e.rev > known[i] { // an event since: the key as it left it
				renewed.held, renewed.err = heldBy(e.after, *w.renews, id)
			}
			w.answer <- renewed
		}
	})
	if !answered {
		return renewals
	}
	return unknown
}

// known records that held's key was its tenure's at revision rev, read
// by the batch.
func (l *lessor) known(held leases.Lease, rev int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if h := l.tenures[tenure{held.Resource, held.Holder, held.Epoch}]; h != nil && rev > h.known {
		h.known = rev
	}
}

// heldBy says whether v, a holder key, is held's, attached to the etcd
// lease id.
func heldBy(v view, held leases.Lease, id clientv3.LeaseID) (bool, error) {
	if !v.found() {
		return false, nil
	}
	record, err := decodeHold(v)
	if err != nil {
		return false, err
	}
	return record.Holder == held.Holder && record.Epoch == held.Epoch && record.Lease == int64(id), nil
}

// leaseEnded reports an answer of etcd saying that the lease is gone.
func leaseEnded(resp *clientv3.LeaseKeepAliveResponse, err error) bool {
	return errors.Is(rpctypes.Error(err), rpctypes.ErrLeaseNotFound) || err == nil && resp.TTL <= 0
}

// use returns the shared lease for ttl, granted or kept alive after the
// call began, with the time-to-live etcd gave it, counted as one more
// user; the caller gives it back with unuse unless a tenure keeps it.
func (l *lessor) use(ctx context.Context, ttl time.Duration) (*sharedLease, int64, error) {
	seconds := int64((ttl + time.Second - 1) / time.Second)
	for {
		l.mu.Lock()
		sl, fresh := l.shared[seconds], false
		if sl == nil {
			sl, fresh = &sharedLease{seconds: seconds, ready: make(chan struct{})}, true
			l.shared[seconds] = sl
		}
		sl.users++
		l.mu.Unlock()
		if fresh {
			return sl, sl.ttl, l.grant(ctx, sl)
		}
		select {
		case <-sl.ready:
		case <-ctx.Done():
			l.unuse(sl)
			return nil, 0, context.Cause(ctx)
		}
		if sl.err != nil {
			l.unuse(sl)
			return nil, 0, sl.err
		}
		a := l.keepAlive(ctx, sl.id, nil)
		switch {
		case leaseEnded(a.resp, a.err):
			l.ended(sl)
			l.unuse(sl)
			continue // grant a new one
		case a.err != nil:
			l.unuse(sl)
			return nil, 0, a.err
		}
		return sl, a.resp.TTL, nil
	}
}

// grant grants sl's etcd lease; on failure, sl is unused and forgotten.
func (l *lessor) grant(ctx context.Context, sl *sharedLease) error {
	var grant *clientv3.LeaseGrantResponse
	sl.err = l.ask(ctx, func() (err error) {
		grant, err = l.store.client.Grant(ctx, sl.seconds)
		return err
	})
	if sl.err == nil {
		sl.id, sl.ttl = grant.ID, grant.TTL
	}
	close(sl.ready)
	if sl.err != nil {
		l.ended(sl)
		l.unuse(sl)
	}
	return sl.err
}

// ended forgets sl for new grants: etcd ended it, or it was never granted.
func (l *lessor) ended(sl *sharedLease) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.shared[sl.seconds] == sl {
		delete(l.shared, sl.seconds)
	}
}

// unuse gives back one use of sl, and revokes it once nothing uses it,
// within a bound of its own: not at its expiry, which would keep its keys
// that a failed delete left behind.
func (l *lessor) unuse(sl *sharedLease) {
	l.mu.Lock()
	sl.users--
	last := sl.users == 0
	if last && l.shared[sl.seconds] == sl {
		delete(l.shared, sl.seconds)
	}
	l.mu.Unlock()
	if last && sl.err == nil {
		ctx, cancel := l.store.bound(context.Background())
		defer cancel()
		_, _ = l.store.client.Revoke(ctx, sl.id)
	}
}

// hold records t as a tenure of this Lessor on sl, whose own deadline is
// a TTL from began, and whose key was its own at revision known (0:
// unknown). Its key is wanted by the watch already (acquire). Once the
// Lessor holds enough tenures for a batch to be watched, it starts the
// watch, so that the tenures granted from then on are known to it: that
// one grant waits for its read, once.
func (l *lessor) hold(t tenure, sl *sharedLease, began time.Time, ttl time.Duration, known int64) {
	h := &heldTenure{shared: sl, ttl: ttl, deadline: began.Add(ttl), known: known}
	l.mu.Lock()
	h.reaper = time.AfterFunc(time.Until(h.deadline), func() { l.reap(t, h) })
	l.tenures[t] = h
	enough := len(l.tenures) > watchedAbove
	l.mu.Unlock()
	if enough && !l.owners.on() {
		ctx, cancel := l.store.bound(context.Background())
		defer cancel()
		l.owners.start(ctx)
	}
}

// forgetLocked forgets t after l.tenures no longer has it: the watch no
// longer wants its key, and stops when no tenure is left. Called with
// l.mu held.
func (l *lessor) forgetLocked(t tenure) {
	l.owners.unwant(l.store.key(heldKind, t.resource))
	if len(l.tenures) == 0 {
		l.owners.stop()
	}
}

// renewed moves t's own deadline to a TTL from began, when t is still
// h, a tenure of this Lessor; false when it was released or reaped since.
func (l *lessor) renewed(t tenure, h *heldTenure, began time.Time, ttl time.Duration) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tenures[t] != h {
		return false
	}
	h.deadline = began.Add(max(ttl, h.ttl)) // the holder may count either
	h.reaper.Reset(time.Until(h.deadline))
	return true
}

// drop forgets t, when it is still h, and gives back its use of the
// shared lease; false when it was dropped already.
func (l *lessor) drop(t tenure, h *heldTenure) bool {
	l.mu.Lock()
	if l.tenures[t] != h {
		l.mu.Unlock()
		return false
	}
	delete(l.tenures, t)
	l.forgetLocked(t)
	h.reaper.Stop()
	l.mu.Unlock()
	l.unuse(h.shared)
	return true
}

// reap deletes the key of tenure t, whose holder has not renewed it
// within its TTL: its holder counts it as ended, and the shared lease
// would keep it. Best effort: a key it fails to delete lives until the
// shared lease ends.
//
// It forgets t before it deletes the key, so that a renewal answered
// meanwhile is refused (renewed) rather than believed; and it does
// nothing when a renewal moved the deadline after the timer fired.
func (l *lessor) reap(t tenure, h *heldTenure) {
	l.mu.Lock()
	if l.tenures[t] != h || time.Now().Before(h.deadline) {
		l.mu.Unlock()
		return
	}
	delete(l.tenures, t)
	l.forgetLocked(t)
	l.mu.Unlock()
	ctx, cancel := l.store.bound(context.Background())
	defer cancel()
	if deleted, err := l.deleteKey(ctx, t, h.shared.id); err == nil && !deleted {
		_, _ = l.stopLateGrant(ctx, t, h.shared.id)
	}
	l.unuse(h.shared)
}

// deleteKey deletes the holder key of t attached to id, in one
// transaction that compares it is t's; false when it is not (t ended).
func (l *lessor) deleteKey(ctx context.Context, t tenure, id clientv3.LeaseID) (bool, error) {
	record, err := json.Marshal(holdRecord{Holder: t.holder, Epoch: t.epoch, Lease: int64(id)})
	if err != nil {
		return false, outcome.BeforeCommit(ctx, err)
	}
	key := l.store.key(heldKind, t.resource)
	var resp *clientv3.TxnResponse
	err = l.ask(ctx, func() (err error) {
		resp, err = l.store.client.Txn(ctx).
			If(clientv3.Compare(clientv3.Value(key), "=", string(record))).
			Then(clientv3.OpDelete(key)).
			Commit()
		return err
	})
	if err != nil {
		return false, outcomeUnknown(ctx, err)
	}
	return resp.Succeeded, nil
}

// errEnded is the refusal of a renewal or release of a tenure that ran
// out or was released.
func errEnded(held leases.Lease) error {
	return fmt.Errorf("%w: epoch %d ran out or was released", leases.ErrLeaseExpired, held.Epoch)
}

// stopLateGrant settles a release of t whose key was not there: t's grant
// may still be on its way (a member holds its transaction, and proposes
// it when it continues), and would then attach t's key to the shared etcd
// lease, which the process's other tenures keep alive: a resource held by
// nobody for as long as they live. So it writes the epoch key again as it
// stands, a new revision that the grant's compare no longer matches; or,
// when the epoch moved on already (the grant applied, or a later one),
// deletes t's key if it is there by now. deleted reports that t's key
// was there and is gone: the release took effect.
func (l *lessor) stopLateGrant(ctx context.Context, t tenure, id clientv3.LeaseID) (deleted bool, err error) {
	epochKey := l.store.key(epochsKind, t.resource)
	for {
		views, err := l.store.read(ctx, epochKey)
		if err != nil {
			return false, outcome.BeforeCommit(ctx, err)
		}
		last, err := decodeEpoch(views[0])
		if err != nil {
			return false, outcome.BeforeCommit(ctx, err)
		}
		if last >= t.epoch { // written since t's grant read it: that grant cannot apply any more
			return l.deleteKey(ctx, t, id)
		}
		value := strconv.FormatInt(last, 10) // "0" where none was granted yet
		var resp *clientv3.TxnResponse
		err = l.ask(ctx, func() (err error) {
			resp, err = l.store.client.Txn(ctx).If(views[0].unchanged()).Then(clientv3.OpPut(epochKey, value)).Commit()
			return err
		})
		if err != nil {
			return false, outcomeUnknown(ctx, err)
		}
		if resp.Succeeded {
			return false, nil
		}
	}
}
