package etcdbackend

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"leases"
)

// The explorer's store answers Snapshot from what it knows while nothing
// has written, and restores on the keys it knows: what it answers must
// always be what a read of the prefix shows, and a restore must leave
// exactly the snapshot's keys, even where its keys changed behind its
// back (which the explorer never does, and the restore's condition
// catches).
func TestExplorableAnswersWhatAReadShows(t *testing.T) {
	ctx, r := start(t)
	rewindable, err := r.Rewindable(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer rewindable.Close()
	e := rewindable.(*explorable)
	other, err := r.cluster.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// read is the prefix as another client reads it, linearizably.
	read := func() string {
		t.Helper()
		resp, err := other.Get(ctx, e.prefix, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
		if err != nil {
			t.Fatal(err)
		}
		pairs := make([][2]string, len(resp.Kvs))
		for i, kv := range resp.Kvs {
			pairs[i] = [2]string{strings.TrimPrefix(string(kv.Key), e.prefix), string(kv.Value)}
		}
		got, err := json.Marshal(pairs)
		if err != nil {
			t.Fatal(err)
		}
		return string(got)
	}
	snapshot := func(what string) string {
		t.Helper()
		got, err := e.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if want := read(); string(got) != want {
			t.Fatalf("snapshot after %s: %s; a read shows %s", what, got, want)
		}
		return string(got)
	}
	restore := func(to, what string) {
		t.Helper()
		if err := e.Restore(ctx, []byte(to)); err != nil {
			t.Fatal(err)
		}
		if got := read(); got != to {
			t.Fatalf("restore %s: a read shows %s, want %s", what, got, to)
		}
	}
	auth := e.Authority()
	empty := snapshot("nothing")
	if _, err := auth.Acquire(ctx, "r", "A", 0, 3); err != nil {
		t.Fatal(err)
	}
	held := snapshot("a grant")
	if _, err := auth.Acquire(ctx, "r", "B", 1, 3); !errors.Is(err, leases.ErrLeaseHeld) {
		t.Fatalf("B's acquire while A holds: %v, want a refusal", err)
	}
	snapshot("a refusal")
	if _, err := e.Receiver(leases.Fenced).Write(ctx, "r", 1, "v"); err != nil {
		t.Fatal(err)
	}
	written := snapshot("a write")
	restore(held, "to before the write")
	snapshot("a restore")
	restore(empty, "to nothing")
	restore(written, "to after the write")

	// Behind its back: a key it does not know of, and one it knows,
	// changed.
	if _, err := other.Put(ctx, e.prefix+"stranger", "x"); err != nil {
		t.Fatal(err)
	}
	restore(held, "over a key put behind its back")
	if _, err := other.Delete(context.Background(), e.prefix, clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	restore(written, "over keys deleted behind its back")
}
