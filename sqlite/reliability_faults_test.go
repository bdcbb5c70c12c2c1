package sqlite_test

// Reliability under faults: processes killed mid-transaction or
// mid-tenure, a controller killed under its workers, a database file that
// disappears or turns read-only. Not among the contract's 17 tests.

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"leases"
	"leases/evidence/experimenttest"
	"leases/evidence/worker"
	"leases/sqlite"
	"leases/testkit/sqlitetest"
	"leases/testkit/testctx"
)

// A worker killed with SIGKILL while it holds BEGIN IMMEDIATE, its write
// done but not committed: the write is gone, the file is sound, and the next
// process gets the lock at once.
func TestKilledInsideATransaction(t *testing.T) {
	cases := []struct {
		point string
		act   func(*worker.Worker) error
	}{
		{"acquire-written", func(w *worker.Worker) error {
			_, err := w.Acquire(testctx.Context(t), "r", 2, 2)
			return err
		}},
		{"write-written", func(w *worker.Worker) error {
			_, err := w.Write(testctx.Context(t), leases.Fenced, "r", 2, "v2")
			return err
		}},
	}
	for _, tc := range cases {
		t.Run(tc.point, func(t *testing.T) {
			ctx := testctx.Context(t)
			path := sqlitetest.Path(t)
			store := sqlitetest.Open(t, path)
			mustAcquire(t, store.Authority(), "r", "A", 0, 2)
			mustWrite(t, store.Receiver(leases.Fenced), "r", 1, "v1")
			before := sqlitetest.Dump(t, path)

			victim := experimenttest.StartWorker(t, ctx, "V", path, pauseEnv+"="+tc.point)
			if err := tc.act(victim); !errors.Is(err, worker.ErrPausedInsideTransaction) {
				t.Fatalf("victim: %v; want it paused inside its transaction", err)
			}
			victim.Kill() // SIGKILL, with the write lock held
			if !experimenttest.ProcessGone(victim.PID()) {
				t.Fatalf("victim %d still exists", victim.PID())
			}
			if after := sqlitetest.Dump(t, path); after != before {
				t.Fatalf("the killed transaction left a trace:\n%s\nbecame\n%s", before, after)
			}

			next := experimenttest.StartWorker(t, ctx, "N", path)
			start := time.Now()
			if err := tc.act(next); err != nil {
				t.Fatalf("the next process: %v", err)
			}
			if waited := time.Since(start); waited >= sqlite.DefaultBusyTimeout {
				t.Fatalf("the next process waited %v, the whole busy timeout", waited)
			}
			if check, err := store.IntegrityCheck(ctx); err != nil || check != "ok" {
				t.Fatalf("integrity_check: %q, %v", check, err)
			}
		})
	}
}

// A holder killed after acquiring and before writing: its lease runs out at
// its expiry tick, the next holder gets a higher epoch, and the receiver
// never sees the dead holder's epoch.
func TestHolderKilledBeforeWriting(t *testing.T) {
	ctx := testctx.Context(t)
	path := sqlitetest.Path(t)
	store := sqlitetest.Open(t, path)
	dead := experimenttest.StartWorker(t, ctx, "A", path)
	if lease, err := dead.Acquire(ctx, "r", 0, 3); err != nil || lease.Epoch != 1 {
		t.Fatalf("A's acquire: %+v, %v", lease, err)
	}
	dead.Kill()

	next := experimenttest.StartWorker(t, ctx, "B", path)
	if _, err := next.Acquire(ctx, "r", 2, 3); !errors.Is(err, leases.ErrLeaseHeld) || !strings.Contains(err.Error(), `"A" until tick 3`) {
		t.Fatalf("acquire before the dead holder's expiry: %v; want it held by A until tick 3", err)
	}
	lease, err := next.Acquire(ctx, "r", 3, 3)
	if err != nil || lease.Epoch != 2 {
		t.Fatalf("acquire at the dead holder's expiry: %+v, %v; want epoch 2", lease, err)
	}
	if got, err := next.Write(ctx, leases.Fenced, "r", lease.Epoch, "from-B"); err != nil || got.Outcome != leases.Accepted {
		t.Fatalf("B's write: %+v, %v", got, err)
	}
	if record, _, _ := store.Receiver(leases.Fenced).Read(ctx, "r"); record != written(2, "from-B") {
		t.Fatalf("receiver %+v; want only B's epoch 2", record)
	}
}

// The database file deleted between steps: the next operation fails with
// ErrDatabaseMoved instead of writing to a file nobody will see again.
func TestDatabaseDeletedBetweenSteps(t *testing.T) {
	ctx := testctx.Context(t)
	path := sqlitetest.Path(t)
	sqlitetest.Open(t, path)
	w := experimenttest.StartWorker(t, ctx, "A", path)
	lease, err := w.Acquire(ctx, "r", 0, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Remove(path + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}
	for name, op := range map[string]func() error{
		"acquire": func() error { _, err := w.Acquire(ctx, "r", 3, 3); return err },
		"write":   func() error { _, err := w.Write(ctx, leases.Fenced, "r", lease.Epoch, "v"); return err },
		"renew":   func() error { _, err := w.Renew(ctx, lease, 1, 3); return err },
	} {
		if err := op(); err == nil || !strings.Contains(err.Error(), sqlite.ErrDatabaseMoved.Error()) {
			t.Errorf("%s after the file was deleted: %v; want %q", name, err, sqlite.ErrDatabaseMoved)
		}
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the deleted file came back: %v", err)
	}
}

// A store opened on a relative path survives a change of working
// directory: the file has not moved, only the process has.
func TestRelativePathSurvivesChdir(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	store := sqlitetest.Open(t, "relative.db")
	t.Chdir(t.TempDir())
	if _, err := store.Authority().Acquire(context.Background(), "r", "A", 0, 1); err != nil {
		t.Fatalf("acquire after a change of directory: %v", err)
	}
}

// The database file made read-only between steps: a process that opens it
// now fails at once with a one-line error and changes nothing. A process
// that opened it before keeps writing: the operating system checks
// permissions when a file is opened, and the writes go to the WAL.
func TestDatabaseMadeReadOnly(t *testing.T) {
	ctx := testctx.Context(t)
	path := sqlitetest.Path(t)
	store := sqlitetest.Open(t, path)
	mustAcquire(t, store.Authority(), "r", "A", 0, 3)
	if err := store.Close(); err != nil { // checkpoints the WAL into the file
		t.Fatal(err)
	}
	earlier := experimenttest.StartWorker(t, ctx, "A", path) // opens it while writable
	before := sqlitetest.Dump(t, path)
	makeReadOnly(t, path)

	_, err := worker.Start(ctx, "B", worker.Options{Backend: "sqlite", Address: path})
	if err == nil || !strings.Contains(err.Error(), "not writable") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("starting a worker on a read-only file: %v; want one line saying it is not writable", err)
	}
	if after := sqlitetest.Dump(t, path); after != before {
		t.Fatalf("the failed start changed the file:\n%s\nbecame\n%s", before, after)
	}
	if lease, err := earlier.Acquire(ctx, "r", 3, 3); err != nil || lease.Epoch != 2 {
		t.Fatalf("the worker that opened the file before: %+v, %v; want it to go on (epoch 2)", lease, err)
	}
}

// makeReadOnly makes path unwritable for this process and its children:
// chmod for an ordinary user; for root, whom permissions do not stop, the
// file system's immutable flag (as chattr +i sets it).
func makeReadOnly(t *testing.T, path string) {
	t.Helper()
	if os.Geteuid() != 0 {
		if err := os.Chmod(path, 0o444); err != nil {
			t.Fatal(err)
		}
		return
	}
	makeImmutable(t, path)
}
