package etcd

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"leases/internal/outcome"
	"leases/internal/rules"
)

// watch returns a channel closed at the first change to key committed
// after the call (an etcd watch from the revision after a read made by
// this call), when the watch breaks, or when ctx ends: a waiter then
// looks again. resource names the key in errors. The watch requires a
// leader: a member that loses its leader ends it, which closes the
// channel too, so that the waiter looks again (through another member)
// rather than wait on one that hears of no change. A line's prefix, when
// not empty, is watched too, for deletions only: a place that ended (its
// waiter went away) or was granted lets the next waiter try.
func (s *Store) watch(ctx context.Context, resource, key, line string) (<-chan struct{}, error) {
	if err := rules.CheckName("resource", resource); err != nil {
		return nil, err
	}
	// A Get, which etcd's client itself asks again of the next member
	// when one refuses it for want of a leader, within the call's bound.
	bounded, cancelGet := s.bound(ctx)
	resp, err := s.client.Get(bounded, key)
	if err != nil {
		err = outcome.BeforeCommit(ctx, boundEnded(bounded, outcome.WithContext(bounded, err)))
	}
	cancelGet()
	if err != nil {
		return nil, fmt.Errorf("watch %q: %w", resource, err)
	}
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	events := s.client.Watch(ctx, key, clientv3.WithRev(resp.Header.Revision+1))
	var deletes clientv3.WatchChan // nil: never ready
	if line != "" {
		deletes = s.client.Watch(ctx, line, clientv3.WithPrefix(), clientv3.WithFilterPut(), clientv3.WithRev(resp.Header.Revision+1))
	}
	changed := make(chan struct{})
	go func() {
		defer close(changed)
		defer cancel()
		for {
			var resp clientv3.WatchResponse
			var ok bool
			select {
			case resp, ok = <-events:
			case resp, ok = <-deletes:
			}
			if !ok || wakes(resp) {
				return
			}
		}
	}()
	return changed, nil
}

// wakes reports whether a watch response ends a wait: a change, or a
// watch that broke (look again either way), but not a progress
// notification, which says only that nothing changed yet.
func wakes(resp clientv3.WatchResponse) bool {
	return len(resp.Events) > 0 || resp.Err() != nil
}

// followOthers starts, once per store, the watch that keeps its guesses
// up to date with other processes' writes (cache.follow), so that a
// decision on a key another process changed last (a waiter acquiring
// after the holder's release, say) still goes out in one round trip. It
// runs until the client closes. A watch that breaks (a compaction, a
// member that lost its leader) is started again after a pause; what it
// missed meanwhile costs a round trip at most, as a guess that is wrong
// always does.
func (s *Store) followOthers() {
	s.following.Do(func() {
		go func() {
			ctx := s.client.Ctx() // ends when the client closes
			for ctx.Err() == nil {
				for resp := range s.client.Watch(clientv3.WithRequireLeader(ctx), s.prefix, clientv3.WithPrefix()) {
					if resp.Err() != nil {
						break
					}
					for _, ev := range resp.Events {
						s.cache.follow(ev)
					}
				}
				pause := time.NewTimer(followAgainAfter)
				select {
				case <-ctx.Done():
				case <-pause.C:
				}
				pause.Stop()
			}
		}()
	})
}

// followAgainAfter is how long a store waits before it watches again
// after its watch broke: long enough not to spin while a cluster has no
// leader, short beside an election.
const followAgainAfter = 100 * time.Millisecond
