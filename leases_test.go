package leases_test

// The contract suite: exactly 17 top-level tests, one or more per clause of
// the contract (C1-C14, named in docs/contract.md). Tests that go beyond the contract live in files of
// their own.

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"leases"
	"leases/evidence/backend"
	"leases/evidence/command"
	"leases/evidence/experimenttest"
	"leases/evidence/scenario"
	"leases/internal/sqlitestore"
	"leases/leasestest"
	"leases/sqlite"
	"leases/testkit/sqlitetest"
	"leases/testkit/testctx"
)

// C1: epochs strictly increase per resource, resources do not share a
// sequence, and a holder that comes back gets a new epoch, its old lease no
// longer its own (leasestest.Epochs, on SQLite).
func TestEpochsIncreasePerResource(t *testing.T) {
	leasestest.Run(t, sqlitetest.Backend, leasestest.Epochs)
}

// C2: a lease granted at t for d ticks is live at t+d-1 and expired at t+d
// (leasestest.Expiry, on SQLite); a query of the live lease draws the same
// line (leasestest.Query).
func TestExpiryBoundary(t *testing.T) {
	leasestest.Run(t, sqlitetest.Backend, leasestest.Expiry, leasestest.Query)
}

// Renewal extends the holder's live lease under the same epoch and grant
// tick, never to an earlier expiry; nobody else can renew it, an expired
// lease cannot be renewed, and a renewal leaves other resources alone
// (leasestest.Renewal, on SQLite).
func TestRenewExtendsOnlyTheHoldersLiveLease(t *testing.T) {
	leasestest.Run(t, sqlitetest.Backend, leasestest.Renewal)
}

// Release frees the resource at once and only that resource, but its epoch
// is never handed out again (leasestest.Release, on SQLite).
func TestReleaseNeverReusesEpoch(t *testing.T) {
	leasestest.Run(t, sqlitetest.Backend, leasestest.Release)
}

// C6: every outcome of the fenced receiver, with the stored record
// unchanged on replay, conflict and stale, and another resource's record
// left alone (leasestest.FencedOutcomes, on SQLite); Fence's outcomes, and
// the guarded receiver's, which adds not-live (leasestest.FenceOutcomes,
// leasestest.GuardedOutcomes).
func TestFencedReceiverOutcomes(t *testing.T) {
	leasestest.Run(t, sqlitetest.Backend, leasestest.FencedOutcomes, leasestest.FenceOutcomes, leasestest.GuardedOutcomes)
}

// C8 at the library level: without the comparison, whatever comes last
// wins, lower epoch or not; the unfenced receiver's records are apart from
// the fenced one's (leasestest.UnfencedOutcomes, on SQLite).
func TestUnfencedReceiverStoresWhateverComesLast(t *testing.T) {
	leasestest.Run(t, sqlitetest.Backend, leasestest.UnfencedOutcomes)
}

// holdInsideTransaction starts op in the background and returns once op is
// paused inside its transaction, between its read and its write; resume
// lets it commit and returns its error.
func holdInsideTransaction(t *testing.T, operation string, op func() error) (resume func() error) {
	t.Helper()
	inside, proceed, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	var paused atomic.Bool
	sqlitestore.HookInsideTransaction = func(got string) {
		if got == operation && paused.CompareAndSwap(false, true) {
			close(inside)
			<-proceed
		}
	}
	t.Cleanup(func() { sqlitestore.HookInsideTransaction = nil })
	go func() { done <- op() }()
	select {
	case <-inside:
	case err := <-done:
		t.Fatalf("%s finished without reaching its transaction: %v", operation, err)
	case <-testctx.Context(t).Done():
		t.Fatalf("%s never reached its transaction", operation)
	}
	return func() error {
		close(proceed)
		return <-done
	}
}

// C1: acquire reads and writes in one BEGIN IMMEDIATE transaction. While one
// acquire sits between its read and its write, another connection cannot
// write at all; if it could, both would be granted epoch 1.
func TestAcquireIsOneImmediateTransaction(t *testing.T) {
	ctx := context.Background()
	path := sqlitetest.Path(t)
	first := sqlitetest.Open(t, path).Authority()
	other, err := sqlite.Options{BusyTimeout: -1}.Open(ctx, path) // fail at once instead of waiting
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close() })

	var granted leases.Lease
	resume := holdInsideTransaction(t, "acquire", func() (err error) {
		granted, err = first.Acquire(ctx, "r", "A", 0, 3)
		return err
	})
	if lease, err := other.Authority().Acquire(ctx, "r", "B", 0, 3); !isBusy(err) || strings.Contains(err.Error(), "cancel") {
		t.Errorf("acquire by another connection during A's transaction: %+v, %v; want SQLITE_BUSY, not a cancellation", lease, err)
	}
	if err := resume(); err != nil || granted.Epoch != 1 {
		t.Fatalf("A's acquire: %+v, %v; want epoch 1", granted, err)
	}
	if _, err := other.Authority().Acquire(ctx, "r", "B", 1, 3); !errors.Is(err, leases.ErrLeaseHeld) {
		t.Fatalf("acquire after A committed: %v, want ErrLeaseHeld", err)
	}
}

// C4: the receiver compares and writes in one transaction. While a write
// sits between its comparison and its store, another connection's higher
// epoch cannot slip in; if it could, the slower lower epoch would overwrite
// it and the stored epoch would go down.
func TestReceiverComparesAndWritesInOneTransaction(t *testing.T) {
	ctx := context.Background()
	path := sqlitetest.Path(t)
	first := sqlitetest.Open(t, path).Receiver(leases.Fenced)
	if _, err := first.Write(ctx, "r", 1, "v1"); err != nil {
		t.Fatal(err)
	}
	otherStore, err := sqlite.Options{BusyTimeout: -1}.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = otherStore.Close() })
	other := otherStore.Receiver(leases.Fenced)

	var slow leases.WriteResult
	resume := holdInsideTransaction(t, "write", func() (err error) {
		slow, err = first.Write(ctx, "r", 2, "v2")
		return err
	})
	if got, err := other.Write(ctx, "r", 3, "v3"); !isBusy(err) {
		t.Errorf("write by another connection during the compare-and-write: %+v, %v; want SQLITE_BUSY", got, err)
	}
	if err := resume(); err != nil || slow.Outcome != leases.Accepted {
		t.Fatalf("paused write: %+v, %v; want accepted", slow, err)
	}
	if got, err := other.Write(ctx, "r", 3, "v3"); err != nil || got.Outcome != leases.Accepted {
		t.Fatalf("retried write: %+v, %v; want accepted", got, err)
	}
	if got, _, _ := first.Read(ctx, "r"); got.Epoch != 3 {
		t.Fatalf("stored epoch %d, want 3: the stored epoch went down", got.Epoch)
	}
}

// C7: the fence is durable. One process commits epoch 2 and exits; another
// process, with a connection of its own, is refused epoch 1.
func TestFenceSurvivesReopenByAnotherProcess(t *testing.T) {
	ctx := testctx.Context(t)
	path := sqlitetest.Path(t)
	sqlitetest.Open(t, path) // creates the database
	newer := experimenttest.StartWorker(t, ctx, "B", path)
	if got, err := newer.Write(ctx, leases.Fenced, "r", 2, "new"); err != nil || got.Outcome != leases.Accepted {
		t.Fatalf("write epoch 2: %+v, %v", got, err)
	}
	if err := newer.Exit(ctx); err != nil {
		t.Fatal(err)
	}
	older := experimenttest.StartWorker(t, ctx, "A", path)
	if older.PID() == newer.PID() || !experimenttest.ProcessGone(newer.PID()) {
		t.Fatalf("want two processes, the first gone: %d, %d", newer.PID(), older.PID())
	}
	got, err := older.Write(ctx, leases.Fenced, "r", 1, "old")
	if err != nil || got.Outcome != leases.Stale || got.Record != written(2, "new") {
		t.Fatalf("write epoch 1 in a new process: %+v, %v; want stale with epoch 2 kept", got, err)
	}
}

// C9: workers are real processes other than the controller; a worker whose
// input closes exits; a hung run fails loudly and leaves no process behind.
func TestWorkerProcesses(t *testing.T) {
	t.Parallel() // whole runs, independent of the other tests
	t.Run("every worker is its own process, gone after the run", func(t *testing.T) {
		experimenttest.SkipWithoutStop(t)
		pids := map[int]string{}
		for _, name := range []string{scenario.UnfencedReceiver, scenario.FencedReceiver,
			scenario.ExpiryBeforeReceiverObservationGap, scenario.FenceBeforeActing} {
			_, err := scenario.RunByName(testctx.Context(t), backend.SQLite{}, name, scenario.Options{
				WorkerStarted: func(sc, worker string, pid int) { pids[pid] = sc + "/" + worker },
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		if len(pids) < 6 {
			t.Fatalf("%d distinct worker processes, want at least 6: %v", len(pids), pids)
		}
		for pid, who := range pids {
			if pid == os.Getpid() {
				t.Errorf("worker %s ran in the controller's own process", who)
			}
			if !experimenttest.ProcessGone(pid) {
				t.Errorf("worker %s (pid %d) outlived the run", who, pid)
			}
		}
	})
	t.Run("a worker whose input closes exits", func(t *testing.T) {
		ctx := testctx.Context(t)
		path := sqlitetest.Path(t)
		sqlitetest.Open(t, path)
		w := experimenttest.StartWorker(t, ctx, "A", path)
		if err := w.Abandon(ctx); err != nil {
			t.Fatal(err)
		}
		if !experimenttest.ProcessGone(w.PID()) {
			t.Fatalf("worker %d still exists", w.PID())
		}
	})
	t.Run("a hung run fails naming scenario and worker, and ends its workers", func(t *testing.T) {
		experimenttest.SkipWithoutStop(t)
		var pids []int
		var lock *sql.Tx
		// The run's bound, which ends this deliberate hang, starts only
		// once the worker has: however slow the machine, the run reaches
		// the worker before it can time out.
		ctx, cancel := context.WithCancelCause(testctx.Context(t))
		defer cancel(nil)
		var bound *time.Timer
		defer func() {
			if bound != nil {
				bound.Stop()
			}
		}()
		_, err := scenario.RunByName(ctx, backend.SQLite{}, scenario.FencedReceiver, scenario.Options{
			SandboxMade: func(_, path string) {
				// Hold the write lock so the worker's first transaction waits.
				db, err := sql.Open("sqlite", path+"?_txlock=immediate")
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = db.Close() })
				if lock, err = db.BeginTx(context.Background(), nil); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = lock.Rollback() })
			},
			WorkerStarted: func(_, _ string, pid int) {
				pids = append(pids, pid)
				if bound == nil {
					bound = time.AfterFunc(time.Second, func() { cancel(errors.New("run timed out after 1s, a bound for hung runs")) })
				}
			},
		})
		if err == nil || !strings.Contains(err.Error(), scenario.FencedReceiver) ||
			!strings.Contains(err.Error(), "worker A") || !strings.Contains(err.Error(), "timed out") {
			t.Fatalf("error %v should name the scenario, the worker and the timeout", err)
		}
		if len(pids) == 0 {
			t.Fatal("no worker was started")
		}
		for _, pid := range pids {
			if !experimenttest.ProcessGone(pid) {
				t.Errorf("worker %d outlived the failed run", pid)
			}
		}
	})
}

// C11: the command reruns the experiment and reproduces results.json, an
// earlier run's output, byte for byte.
func TestCommandReproducesResultsJSON(t *testing.T) {
	experimenttest.SkipWithoutStop(t)
	t.Parallel() // a whole run, independent of the other tests
	out := filepath.Join(t.TempDir(), "reproduced.json")
	code, _, stderr := experimenttest.RunCommand(t, "--check", "results.json", "--output", out)
	if code != command.ExitMatch {
		t.Fatalf("exit %d, want 0; stderr:\n%s", code, stderr)
	}
	want := experimenttest.CommittedResults(t)
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("reproduced.json differs from results.json")
	}
}

// C11: --check catches a change of meaning and names where it is; a change
// of bytes only is caught too. (A file of another shape is refused before
// the run: TestCommandRejectsBadUsageAndFiles.)
func TestCheckReportsTamperedFile(t *testing.T) {
	t.Parallel() // runs of the command, independent of the other tests
	// What is checked is the comparison, not the exploration: the file
	// tampered with and each rerun have small exploration bounds (the full
	// run is TestCommandReproducesResultsJSON's).
	original := experimenttest.SmallRun(t)
	cases := []struct {
		name       string
		tamper     func(string) string
		wantInLine string
	}{
		{"a stale write turned into an accepted one",
			func(s string) string { return strings.Replace(s, `"outcome": "stale"`, `"outcome": "accepted"`, 1) },
			`.outcome: expected "accepted", got "stale"`},
		{"a verdict turned",
			func(s string) string {
				return strings.Replace(s, `"stale_write_rejected": true`, `"stale_write_rejected": false`, 1)
			},
			`.verdicts.stale_write_rejected: expected false, got true`},
		{"a key added",
			func(s string) string {
				return strings.Replace(s, `"outcome": "accepted",`, `"outcome": "accepted", "detail": "forged",`, 1)
			},
			`.detail: expected "forged", got no such key`},
		{"a key removed",
			func(s string) string {
				return strings.Replace(s, `"value_b": "value-from-B",`+"\n"+`            "conflicting_value_b": "other-value-from-B"`, `"value_b": "value-from-B"`, 1)
			},
			`.parameters.conflicting_value_b: expected no such key, got "other-value-from-B"`},
		{"the last backend removed",
			func(s string) string {
				cut, end := strings.Index(s, ",\n    {\n      \"backend\": \"etcd\""), strings.Index(s, "\n  ],\n  \"agreement\"")
				if cut < 0 || end < cut {
					return s
				}
				return s[:cut] + s[end:]
			},
			`at $.backends: expected 1 elements, got 2 elements`},
		{"the same meaning in other bytes",
			func(s string) string { return strings.ReplaceAll(s, "  ", "\t") },
			"means the same"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tampered := tc.tamper(original)
			if tampered == original {
				t.Fatal("the tampering changed nothing")
			}
			code, lastLine := experimenttest.CheckTampered(t, tampered, experimenttest.SmallBounds...)
			if code != command.ExitMismatch || !strings.Contains(lastLine, tc.wantInLine) {
				t.Fatalf("exit %d, last line %q; want exit 1 and %q", code, lastLine, tc.wantInLine)
			}
		})
	}
}

// C11: usage errors and missing or garbled files are found before anything
// runs: exit 2, one line, and the file being checked left as it was.
func TestCommandRejectsBadUsageAndFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string { return experimenttest.WriteFile(t, dir, name, content) }
	valid := experimenttest.CommittedResults(t)
	checked := write("checked.json", string(valid))
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", []string{"--frobnicate"}, "flag provided but not defined"},
		{"stray argument", []string{"results.json"}, "unexpected argument"},
		{"non-positive timeout", []string{"--timeout", "0s"}, "--timeout must be positive"},
		{"missing --check file", []string{"--check", filepath.Join(dir, "absent.json")}, "cannot read --check file"},
		{"empty --check file", []string{"--check", write("empty.json", "")}, "not valid JSON: unexpected end of JSON input"},
		{"truncated --check file", []string{"--check", write("truncated.json", string(valid[:len(valid)/2]))}, "not valid JSON"},
		{"not JSON at all", []string{"--check", write("text.json", "hello\n")}, "not valid JSON"},
		{"two documents", []string{"--check", write("two.json", "{}\n{}\n")}, "not valid JSON"},
		{"JSON of another shape", []string{"--check", write("array.json", "[1,2,3]\n")}, "is not a results document: at $: expected an object"},
		{"--output into a missing directory", []string{"--output", filepath.Join(dir, "no", "out.json")}, "does not exist"},
		{"--output onto the --check file", []string{"--check", checked, "--output", checked}, "same file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := experimenttest.RunCommand(t, tc.args...)
			if code != command.ExitUsage || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 2 and one line containing %q", code, stdout, stderr, tc.want)
			}
		})
	}
	if got, _ := os.ReadFile(checked); !bytes.Equal(got, valid) {
		t.Error("the --check file was changed")
	}
	if code, stdout, _ := experimenttest.RunCommand(t, "-h"); code != 0 || !strings.Contains(stdout, "usage: run-experiment") {
		t.Errorf("-h: exit %d, stdout %q", code, stdout)
	}
}

// Bad input is refused with ErrInvalidInput in one line and changes
// nothing, row for row (leasestest.BadInput, on SQLite).
func TestBadInputChangesNothing(t *testing.T) {
	leasestest.Run(t, sqlitetest.Backend, leasestest.BadInput)
	ctx := context.Background()
	if _, err := sqlite.Open(ctx, ""); !errors.Is(err, leases.ErrInvalidInput) {
		t.Errorf("open with an empty path: %v", err)
	}
	half := sqlitetest.Open(t, sqlitetest.Path(t)).Receiver("half-fenced")
	if _, err := half.Write(ctx, "r", 2, "x"); !errors.Is(err, leases.ErrInvalidInput) {
		t.Errorf("a write to a receiver of an unknown mode: %v", err)
	}
}

// C8, C9: the seed's schedule with real processes against a receiver that
// does not compare epochs. The paused old holder's write lands after the
// new holder's: lease expiry alone does not revoke A.
func TestUnfencedReceiver(t *testing.T) {
	sc, _ := experimenttest.RunScenario(t, scenario.UnfencedReceiver)
	checkBoundarySteps(t, sc)
	b := experimenttest.FindStep(t, sc, "B", "write", 1)
	a := experimenttest.FindStep(t, sc, "A", "write", 1)
	if b.Outcome != "accepted" || a.Outcome != "accepted" || a.Epoch != 1 {
		t.Fatalf("B's write %s, A's epoch-%d write %s; want both accepted", b.Outcome, a.Epoch, a.Outcome)
	}
	if sc.Final == nil || *sc.Final != written(1, sc.Parameters.ValueA) {
		t.Fatalf("final %+v; want A's stale value at epoch 1", sc.Final)
	}
	v := sc.Verdicts
	if !v.StaleWriteAccepted || !v.NewerValueLost || !v.TwoValuesAcceptedAtOneEpoch || v.StaleWriteRejected {
		t.Fatalf("verdicts %+v", v)
	}
}

// C6, C8, C9: the same schedule against the fenced receiver: A's old epoch
// is rejected as stale and B's value stays; B's resend is a replay and its
// different value a conflict, neither changing the record.
func TestFencedReceiver(t *testing.T) {
	sc, _ := experimenttest.RunScenario(t, scenario.FencedReceiver)
	checkBoundarySteps(t, sc)
	bValue := written(2, sc.Parameters.ValueB)
	for n, want := range []leases.Outcome{leases.Accepted, leases.Replay, leases.Conflict} {
		s := experimenttest.FindStep(t, sc, "B", "write", n+1)
		if s.Outcome != string(want) || s.ReceiverAfter == nil || *s.ReceiverAfter != bValue {
			t.Errorf("B's write %d: %s leaving %+v; want %s leaving %+v", n+1, s.Outcome, s.ReceiverAfter, want, bValue)
		}
	}
	a := experimenttest.FindStep(t, sc, "A", "write", 1)
	if a.Outcome != string(leases.Stale) || a.Epoch != 1 {
		t.Fatalf("A's epoch-%d write: %s, want stale", a.Epoch, a.Outcome)
	}
	if sc.Final == nil || *sc.Final != bValue {
		t.Fatalf("final %+v, want B's value %+v", sc.Final, bValue)
	}
	v := sc.Verdicts
	if v.StaleWriteAccepted || v.NewerValueLost || !v.StaleWriteRejected || !v.ReplayReported || !v.ConflictRejected {
		t.Fatalf("verdicts %+v", v)
	}
}

// C7, C9: the gap. B holds epoch 2 but has not written; A's epoch-1 write
// reaches the receiver first and is accepted. Only once B's epoch 2 is
// committed there is A's write rejected.
func TestExpiryBeforeReceiverObservationGap(t *testing.T) {
	sc, _ := experimenttest.RunScenario(t, scenario.ExpiryBeforeReceiverObservationGap)
	granted := experimenttest.FindStep(t, sc, "B", "acquire", 1)
	first := experimenttest.FindStep(t, sc, "A", "write", 1)
	if granted.Epoch != 2 || first.Outcome != string(leases.Accepted) || first.HighestEpochGranted != 2 {
		t.Fatalf("B granted epoch %d; A's write %s while epoch %d was granted; want A accepted after epoch 2",
			granted.Epoch, first.Outcome, first.HighestEpochGranted)
	}
	if b := experimenttest.FindStep(t, sc, "B", "write", 1); b.Outcome != string(leases.Accepted) {
		t.Fatalf("B's write: %s, want accepted", b.Outcome)
	}
	if again := experimenttest.FindStep(t, sc, "A", "write", 2); again.Outcome != string(leases.Stale) {
		t.Fatalf("A's write after the receiver committed epoch 2: %s, want stale", again.Outcome)
	}
	v := sc.Verdicts
	if !v.StaleWriteAccepted || !v.StaleWriteRejected || v.NewerValueLost {
		t.Fatalf("verdicts %+v", v)
	}
}

// checkBoundarySteps checks C2 inside a real-process scenario: B is refused
// one tick before A's expiry and granted the next epoch at it.
func checkBoundarySteps(t *testing.T, sc scenario.Scenario) {
	t.Helper()
	a := experimenttest.FindStep(t, sc, "A", "acquire", 1)
	early := experimenttest.FindStep(t, sc, "B", "acquire", 1)
	atExpiry := experimenttest.FindStep(t, sc, "B", "acquire", 2)
	if a.Outcome != "granted" || a.Epoch != 1 || early.Tick != a.ExpiresAt-1 || early.Outcome != "refused" ||
		atExpiry.Tick != a.ExpiresAt || atExpiry.Outcome != "granted" || atExpiry.Epoch != 2 {
		t.Fatalf("boundary steps: A %+v, B early %+v, B at expiry %+v", a, early, atExpiry)
	}
	if !sc.Verdicts.RefusedOneTickBeforeExpiry || !sc.Verdicts.GrantedAtExpiry {
		t.Fatalf("boundary verdicts %+v", sc.Verdicts)
	}
}
