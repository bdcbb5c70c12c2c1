package worker_test

import (
	"path/filepath"
	"testing"

	"leases/evidence/experimenttest"
	"leases/evidence/worker"
	"leases/testkit/testctx"
)

// A pool's workers are processes of their own, one per Start, each on the
// sandbox it was handed; the ones never handed out are gone after Close.
func TestPoolHandsOutFreshWorkers(t *testing.T) {
	ctx := testctx.Context(t)
	pool := worker.NewPool(ctx, 2)
	path := filepath.Join(t.TempDir(), "pool.db")
	seen := map[int]string{}
	for _, name := range []string{"A", "B", "C"} {
		var started int
		w, err := pool.Start(ctx, name, worker.Options{Backend: "sqlite", Address: path, Started: func(pid int) { started = pid }})
		if err != nil {
			t.Fatal(err)
		}
		if started != w.PID() || w.Name() != name {
			t.Fatalf("worker %s: Started learned pid %d, the worker is %d named %q", name, started, w.PID(), w.Name())
		}
		if other, dup := seen[w.PID()]; dup {
			t.Fatalf("workers %s and %s are one process (%d)", other, name, w.PID())
		}
		seen[w.PID()] = name
		if _, err := w.Acquire(ctx, "r-"+name, 1, 10); err != nil {
			t.Fatalf("worker %s on its sandbox: %v", name, err)
		}
		if err := w.Exit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	pool.Close()
	if left := children(t); len(left) > 0 {
		t.Errorf("after Close, processes %v still are this test's children", left)
	}
	for pid, name := range seen {
		if !experimenttest.ProcessGone(pid) {
			t.Errorf("worker %s (pid %d) outlived its Exit", name, pid)
		}
	}
}
