package worker_test

import (
	"path/filepath"
	"testing"

	"leases/evidence/experimenttest"
	"leases/evidence/worker"
	"leases/testkit/testctx"
)

// A pool's workers are processes of their own while they work: two Starts
// without an Exit between them are two processes. A worker that exits
// gives its process back, having ended its session (its lease released)
// and closed its store, and a later Start is served by it: one after
// another, Starts cost no new process. The Worker that exited does nothing
// more: its Kill does not end the process that now serves another. Close
// ends every process in standby.
func TestPoolReusesAProcessOnlyAfterItsWorkerExited(t *testing.T) {
	experimenttest.SkipWithoutStop(t)
	ctx := testctx.Context(t)
	pool := worker.NewPool(ctx, 1)
	path := filepath.Join(t.TempDir(), "pool.db")
	start := func(name string) *worker.Worker {
		t.Helper()
		var started int
		w, err := pool.Start(ctx, name, worker.Options{Backend: "sqlite", Address: path, Started: func(pid int) { started = pid }})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Kill)
		if started != w.PID() || w.Name() != name {
			t.Fatalf("worker %s: Started learned pid %d, the worker is %d named %q", name, started, w.PID(), w.Name())
		}
		return w
	}
	a, b := start("A"), start("B")
	if a.PID() == b.PID() {
		t.Fatalf("workers A and B, both working, are one process (%d)", a.PID())
	}
	if _, err := a.StartSession(ctx, "r", 1, 10, 2); err != nil {
		t.Fatal(err)
	}
	for _, w := range []*worker.Worker{a, b} {
		if err := w.Exit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	a.Kill() // A's process is the pool's now: this must not end it
	if _, err := a.Acquire(ctx, "other", 1, 10); err == nil {
		t.Fatal("a worker that exited still acquires")
	}
	seen := map[int]bool{a.PID(): true, b.PID(): true}
	for i, name := range []string{"C", "D", "E", "F"} {
		w := start(name)
		seen[w.PID()] = true
		// At tick 2, before A's lease of tick 1 would have expired: only
		// A's release at its Exit lets the first of them acquire.
		lease, err := w.Acquire(ctx, "r", int64(2+20*i), 10)
		if err != nil {
			t.Fatalf("worker %s: %v", name, err)
		}
		if lease.Epoch != int64(2+i) {
			t.Fatalf("worker %s got epoch %d, want %d", name, lease.Epoch, 2+i)
		}
		if err := w.Exit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := pool.Started(); got > 3 || len(seen) > 3 {
		t.Errorf("six workers, at most two at once, took %d processes (%d started); want at most 3", len(seen), got)
	}
	pool.Close()
	if left := children(t); len(left) > 0 {
		t.Errorf("after Close, processes %v still are this test's children", left)
	}
	for pid := range seen {
		if !experimenttest.ProcessGone(pid) {
			t.Errorf("pid %d outlived the pool's Close", pid)
		}
	}
}
