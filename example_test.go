package leases_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"leases"
	"leases/sqlite"
)

// A paused holder comes back after its lease expired and another holder
// took over. The fenced receiver rejects the old epoch once it has seen the
// new one.
func Example() {
	ctx := context.Background()
	store, done := openExampleStore(ctx)
	defer done()

	authority, receiver := store.Authority(), store.Receiver(leases.Fenced)

	a, _ := authority.Acquire(ctx, "report", "A", 0, 3) // live for ticks 0, 1, 2
	b, _ := authority.Acquire(ctx, "report", "B", 3, 3) // A's lease expired at tick 3
	fromB, _ := receiver.Write(ctx, "report", b.Epoch, "B's report")
	fromA, _ := receiver.Write(ctx, "report", a.Epoch, "A's late report")
	fmt.Println("A epoch", a.Epoch, "B epoch", b.Epoch)
	fmt.Println("B's write:", fromB.Outcome)
	fmt.Println("A's write:", fromA.Outcome, "- stored:", fromA.Record.Value)
	// Output:
	// A epoch 1 B epoch 2
	// B's write: accepted
	// A's write: stale - stored: B's report
}

func ExampleAuthority_Acquire() {
	ctx := context.Background()
	store, done := openExampleStore(ctx)
	defer done()
	authority := store.Authority()

	lease, err := authority.Acquire(ctx, "report", "A", 10, 5)
	fmt.Println(lease.Epoch, lease.ExpiresAt, err)
	_, err = authority.Acquire(ctx, "report", "B", 14, 5)
	fmt.Println(errors.Is(err, leases.ErrLeaseHeld), err)
	lease, err = authority.Acquire(ctx, "report", "B", 15, 5)
	fmt.Println(lease.Epoch, lease.ExpiresAt, err)
	// Output:
	// 1 15 <nil>
	// true acquire "report" for "B" at tick 14: lease held: resource "report" is held by "A" until tick 15
	// 2 20 <nil>
}

func ExampleReceiver_Write() {
	ctx := context.Background()
	store, done := openExampleStore(ctx)
	defer done()
	receiver := store.Receiver(leases.Fenced)

	for _, w := range []struct {
		epoch int64
		value string
	}{{2, "v2"}, {2, "v2"}, {2, "other"}, {1, "v1"}, {3, "v3"}} {
		result, err := receiver.Write(ctx, "report", w.epoch, w.value)
		if err != nil {
			panic(err)
		}
		fmt.Printf("epoch %d %-5q -> %-8s stored: epoch %d %q\n", w.epoch, w.value, result.Outcome, result.Record.Epoch, result.Record.Value)
	}
	// Output:
	// epoch 2 "v2"  -> accepted stored: epoch 2 "v2"
	// epoch 2 "v2"  -> replay   stored: epoch 2 "v2"
	// epoch 2 "other" -> conflict stored: epoch 2 "v2"
	// epoch 1 "v1"  -> stale    stored: epoch 2 "v2"
	// epoch 3 "v3"  -> accepted stored: epoch 3 "v3"
}

// openExampleStore opens a store in a fresh temporary directory; done
// closes it and removes the directory.
func openExampleStore(ctx context.Context) (store *sqlite.Store, done func()) {
	dir, err := os.MkdirTemp("", "leases-example-")
	if err != nil {
		panic(err)
	}
	store, err = sqlite.Open(ctx, filepath.Join(dir, "leases.db"))
	if err != nil {
		panic(err)
	}
	return store, func() {
		_ = store.Close()
		_ = os.RemoveAll(dir)
	}
}

// A new holder records its epoch at the receiver before it acts: the old
// holder's late write is then stale even though the new holder has not
// written yet, and the new holder reads what is there before it writes.
func ExampleReceiver_Fence() {
	ctx := context.Background()
	store, done := openExampleStore(ctx)
	defer done()
	receiver := store.Receiver(leases.Fenced)

	_, _ = receiver.Write(ctx, "report", 1, "A's report")
	observed, _ := receiver.Fence(ctx, "report", 2) // B holds epoch 2 now
	late, _ := receiver.Write(ctx, "report", 1, "A's late report")
	current, _, _ := receiver.Read(ctx, "report")
	first, _ := receiver.Write(ctx, "report", 2, "B's report")
	fmt.Println("observe:", observed.Outcome)
	fmt.Println("A's late write:", late.Outcome)
	fmt.Printf("B reads: fence %d, %q from epoch %d\n", current.Epoch, current.Value, current.ValueEpoch)
	fmt.Println("B's first write:", first.Outcome)
	// Output:
	// observe: accepted
	// A's late write: stale
	// B reads: fence 2, "A's report" from epoch 1
	// B's first write: accepted
}
