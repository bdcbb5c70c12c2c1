package sqlite_test

// A read that fails inside an operation is a failure, never "not found".
// Not among the contract's 17 tests.

import (
	"context"
	"strings"
	"testing"

	"leases"
	"leases/evidence/backend"
	"leases/evidence/experimenttest"
	"leases/evidence/worker"
	"leases/testkit/sqlitetest"
	"leases/testkit/testctx"
)

// Each operation reads its row first. If that read failed and were taken
// for "no row", an acquire would grant epoch 1 over an existing lease, a
// fenced write or an observe would lower the fence. Here the read fails
// for real: strace, attached to the worker, fails the second pread of
// its next request (the first reads page 1; the second is the row's index
// page, which another process has just changed; SQLite reports the failed
// read as a malformed page), and the operation must fail with that error,
// changing nothing.
func TestFailedReadIsNotNotFound(t *testing.T) {
	cases := []struct {
		name string
		// change is the other process's change after the worker's cache
		// was warm, so that the worker must read the row again.
		change func(t *testing.T, auth leases.Authority, fenced leases.Receiver, held leases.Lease)
		act    func(ctx context.Context, w *worker.Worker) error
		read   string // the read the error names
	}{
		{"acquire",
			func(t *testing.T, auth leases.Authority, _ leases.Receiver, held leases.Lease) {
				if err := auth.Release(context.Background(), held, 6); err != nil {
					t.Fatal(err)
				}
			},
			func(ctx context.Context, w *worker.Worker) error { _, err := w.Acquire(ctx, "r", 20, 5); return err },
			"read lease"},
		{"fenced write",
			func(t *testing.T, _ leases.Authority, fenced leases.Receiver, _ leases.Lease) {
				mustWrite(t, fenced, "r", 5, "v5")
			},
			func(ctx context.Context, w *worker.Worker) error {
				_, err := w.Write(ctx, leases.Fenced, "r", 3, "v3")
				return err
			},
			"read record"},
		{"observe",
			func(t *testing.T, _ leases.Authority, fenced leases.Receiver, _ leases.Lease) {
				mustWrite(t, fenced, "r", 5, "v5")
			},
			func(ctx context.Context, w *worker.Worker) error { _, err := w.Fence(ctx, "r", 3); return err },
			"read record"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testctx.Context(t)
			path := sqlitetest.Path(t)
			store := sqlitetest.Open(t, path)
			auth, fenced := store.Authority(), store.Receiver(leases.Fenced)
			held := mustAcquire(t, auth, "r", "A", 5, 10)
			mustWrite(t, fenced, "r", held.Epoch, "v1")
			w := experimenttest.StartWorker(t, ctx, "W", path, oneThreadEnv+"=1")
			if _, _, err := w.Read(ctx, backend.Fenced, "r"); err != nil { // warms its cache
				t.Fatal(err)
			}
			tc.change(t, auth, fenced, held)
			before := sqlitetest.Dump(t, path)
			attachStrace(t, ctx, w.PID(), "-P", path, "-P", path+"-wal", "-e", "trace=pread64", "-e", "inject=pread64:error=EIO:when=2")
			err := tc.act(ctx, w)
			if err == nil || !strings.Contains(err.Error(), tc.read+": ") {
				t.Fatalf("%s with its row's read failing: %v; want the error of %q", tc.name, err, tc.read)
			}
			if after := sqlitetest.Dump(t, path); after != before {
				t.Fatalf("the failed %s changed the database:\n%s\nbecame\n%s", tc.name, before, after)
			}
		})
	}
}
