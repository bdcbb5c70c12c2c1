package sqlite_test

import (
	"path/filepath"
	"testing"
	"time"

	"leases/clock"
	"leases/session"
	"leases/sqlite"
	"leases/testkit/testctx"
)

// A waiter learns of a release made through another connection to the
// file (another process's, as far as SQLite can tell) without waiting
// for the released lease's expiry: its store watches PRAGMA
// data_version. The waiter's clock never reaches the expiry here, so a
// waiter that learned only from its own process would wait forever
// (until the test's deadline).
func TestWaiterLearnsOfAnotherConnectionsRelease(t *testing.T) {
	ctx := testctx.Context(t)
	path := filepath.Join(t.TempDir(), "leases.db")
	open := func() *sqlite.Store {
		s, err := sqlite.Options{WatchInterval: time.Millisecond}.Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	holderSide, waiterSide := open(), open()
	clk := clock.NewManual(0)
	opts := session.Options{TTL: 1000 * time.Millisecond, Margin: time.Millisecond}
	a, err := session.Start(ctx, clock.Lessor(holderSide.Authority(), clk), "r", "A", opts)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	var b *session.Session
	go func() {
		var err error
		b, err = session.Wait(ctx, clock.Lessor(waiterSide.Authority(), clk), "r", "B", opts)
		got <- err
	}()
	if err := clk.Waiters(ctx, 3); err != nil { // A's renewal and deadline, B's wait for the expiry
		t.Fatal(err)
	}
	// A change to another resource through the other connection: the
	// waiter looks at r's row again, finds it as it was, and goes on
	// waiting.
	if _, err := holderSide.Authority().Acquire(ctx, "other", "C", 0, 10); err != nil {
		t.Fatal(err)
	}
	if err := clk.Advance(7); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(ctx); err != nil { // at tick 7, through the other connection
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	if l := b.Lease(); l.Epoch != 2 || l.GrantedAt != 7 {
		t.Fatalf("B holds %+v; want epoch 2 granted at tick 7, right after the release", l)
	}
}
