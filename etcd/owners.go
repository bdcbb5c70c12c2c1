package etcd

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"
)

// owners is the Lessor's one watch on its holder keys, which lets a large
// batch of renewals learn whether their keys are still their tenures'
// without reading them (renewals.go says when and why). It keeps, for
// each key of a tenure of this Lessor (or of a grant on its way), the last
// event the watch delivered on it, and covered: the revision up to which
// the watch has delivered every event (a progress notification says so).
type owners struct {
	// barrier is a linearizable read's revision: every write
	// acknowledged before it was asked is at or below it.
	barrier func(context.Context) (int64, error)
	// watch watches the holder keys from revision from on.
	watch func(ctx context.Context, from int64) clientv3.WatchChan
	// progress asks the watch's member for a progress notification.
	progress func(context.Context) error
	// base is the watch's context: every watch of this Lessor is on it.
	base context.Context

	mu    sync.Mutex
	state watchState
	gen   int   // the current watch's, raised at each start and stop
	from  int64 // the first revision the current watch delivers
	// covered is the revision up to which the current watch has
	// delivered every event on the holder keys.
	covered  int64
	advanced chan struct{} // closed, and made anew, when covered moves or the watch begins or ends
	cancel   context.CancelFunc
	keys     map[string]*lastEvent // the keys this Lessor holds or is granting
}

type watchState int

const (
	watchOff watchState = iota
	watchStarting
	watchOn
)

// lastEvent is one key's wanting and the last event seen on it.
type lastEvent struct {
	wants int   // tenures and grants of the key
	rev   int64 // the event's revision; 0 for none seen
	after view  // the key after it: not found for a delete
}

// streams names each Lessor's watch stream apart (ownersOf).
var streams atomic.Int64

// ownersOf is the watch of a Lessor of s, not started. Its watch and
// its progress requests carry a metadata key of their own: etcd's client
// puts the watches of one context's metadata on one gRPC stream, and a
// member answers a progress request only when every watch of the stream
// is in step (server storage/mvcc watchable_store.go, progressIfSync), so
// a watch that another caller starts from an older revision (Changed)
// must not hold up this one's; and a progress request finds its stream by
// the same metadata (client watch.go, RequestProgress).
func ownersOf(s *Store) *owners {
	base := clientv3.WithRequireLeader(metadata.AppendToOutgoingContext(s.client.Ctx(),
		"leases-holder-watch", strconv.FormatInt(streams.Add(1), 10)))
	md, _ := metadata.FromOutgoingContext(base)
	o := newOwners(base)
	o.barrier = func(ctx context.Context) (int64, error) {
		var resp *clientv3.GetResponse
		err := s.ask(ctx, func() (err error) {
			resp, err = s.client.Get(ctx, s.key(heldKind, ""), clientv3.WithCountOnly())
			return err
		})
		if err != nil {
			return 0, err
		}
		return resp.Header.Revision, nil
	}
	o.watch = func(ctx context.Context, from int64) clientv3.WatchChan {
		return s.client.Watch(ctx, s.key(heldKind, ""), clientv3.WithPrefix(), clientv3.WithRev(from))
	}
	o.progress = func(ctx context.Context) error {
		return s.client.RequestProgress(metadata.NewOutgoingContext(ctx, md))
	}
	return o
}

// newOwners is a watch on base, whose functions the caller sets.
func newOwners(base context.Context) *owners {
	return &owners{base: base, advanced: make(chan struct{}), keys: map[string]*lastEvent{}}
}

// want records the events on key from now on, until unwant: called
// before the grant's transaction is sent, so that every event after the
// grant is recorded.
func (o *owners) want(key string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	e := o.keys[key]
	if e == nil {
		e = &lastEvent{}
		o.keys[key] = e
	}
	e.wants++
}

// unwant gives back one want of key.
func (o *owners) unwant(key string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if e := o.keys[key]; e != nil {
		if e.wants--; e.wants <= 0 {
			delete(o.keys, key)
		}
	}
}

// on reports whether the watch is running.
func (o *owners) on() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.state == watchOn
}

// start starts the watch, unless it runs or is starting, from the
// revision after a linearizable read: a tenure's key is known from then
// on once it is known at that revision or later (its grant, a read of
// it). Within ctx; a failure leaves it off, for a later batch to start.
func (o *owners) start(ctx context.Context) {
	o.mu.Lock()
	if o.state != watchOff {
		o.mu.Unlock()
		return
	}
	o.state = watchStarting
	o.gen++
	gen := o.gen
	o.mu.Unlock()
	rev, err := o.barrier(ctx)
	if err != nil {
		o.ended(gen)
		return
	}
	o.mu.Lock()
	if o.gen != gen { // stopped meanwhile
		o.mu.Unlock()
		return
	}
	o.from, o.covered = rev+1, rev
	watchCtx, cancel := context.WithCancel(o.base)
	o.cancel = cancel
	o.mu.Unlock()
	// etcd's client returns a watch once its member has created it,
	// which a member that hangs never does: no caller waits for that.
	go func() {
		events := o.watch(watchCtx, rev+1)
		o.mu.Lock()
		if o.gen == gen {
			o.state = watchOn
			close(o.advanced)
			o.advanced = make(chan struct{})
		}
		o.mu.Unlock()
		o.follow(gen, events)
	}()
}

// stop ends the watch: the Lessor holds no tenure.
func (o *owners) stop() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.state != watchOff {
		o.endLocked()
	}
}

// ended ends the watch of gen, if it is still the current one.
func (o *owners) ended(gen int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.gen == gen {
		o.endLocked()
	}
}

func (o *owners) endLocked() {
	o.gen++
	o.state = watchOff
	if o.cancel != nil {
		o.cancel()
		o.cancel = nil
	}
	close(o.advanced)
	o.advanced = make(chan struct{})
}

// follow records the events of the watch of gen, and its progress, until
// it ends: broken, canceled, compacted, or refused for want of a leader
// (it requires one), each of which turns it off.
func (o *owners) follow(gen int, events clientv3.WatchChan) {
	defer o.ended(gen)
	for resp := range events {
		if resp.Err() != nil || resp.Canceled {
			return
		}
		o.mu.Lock()
		if o.gen != gen {
			o.mu.Unlock()
			return
		}
		for _, ev := range resp.Events {
			o.recordLocked(ev)
		}
		// A progress notification of revision R: every event at or
		// below R was delivered before it, on this channel (the member
		// sends it only while the watch is in step, after the events).
		if resp.IsProgressNotify() && resp.Header.GetRevision() > o.covered {
			o.covered = resp.Header.GetRevision()
			close(o.advanced)
			o.advanced = make(chan struct{})
		}
		o.mu.Unlock()
	}
}

// recordLocked keeps ev as the last event of its key, when the key is
// wanted.
func (o *owners) recordLocked(ev *clientv3.Event) {
	key := string(ev.Kv.Key)
	e := o.keys[key]
	if e == nil || ev.Kv.ModRevision <= e.rev {
		return
	}
	e.rev, e.after = ev.Kv.ModRevision, view{key: key}
	if ev.Type == clientv3.EventTypePut {
		e.after.value, e.after.rev = ev.Kv.Value, ev.Kv.ModRevision
	}
}

// progressAgainAfter is how long a batch waits for the progress
// notification it asked for before it asks again: a member drops the
// request while the watch is not in step (it catches up, from an older
// revision or after being slow, every 100 ms: watchable_store.go's sync
// loop), and a request may be lost with a stream that broke and resumed.
const progressAgainAfter = 100 * time.Millisecond

// upTo waits, within ctx, until the watch has delivered every event up to
// rev, asking for progress notifications; then it calls decide with the
// first revision the watch delivers and the keys' last events, under the
// watch's lock. False when the watch is off, ends meanwhile, or ctx ends.
func (o *owners) upTo(ctx context.Context, rev int64, decide func(from int64, keys map[string]*lastEvent)) bool {
	for {
		o.mu.Lock()
		if o.state != watchOn {
			o.mu.Unlock()
			return false
		}
		if o.covered >= rev {
			defer o.mu.Unlock()
			decide(o.from, o.keys)
			return true
		}
		advanced := o.advanced
		o.mu.Unlock()
		if err := o.progress(ctx); err != nil {
			return false
		}
		again := time.NewTimer(progressAgainAfter)
		select {
		case <-advanced:
		case <-again.C:
		case <-ctx.Done():
		}
		again.Stop()
		if ctx.Err() != nil {
			return false
		}
	}
}
