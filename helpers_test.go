package leases_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"leases"
	"leases/internal/contract"
	"leases/internal/experiment/backend"
	"leases/internal/experiment/command"
	"leases/internal/experiment/scenario"
	"leases/internal/experiment/worker"
	"leases/internal/testctx"
	"leases/sqlite"

	sqlitedriver "modernc.org/sqlite"
)

// drivers are the backends this test binary knows: its workers and the
// command it plays run on SQLite. The etcd module's tests run the same
// machinery on etcd.
var drivers = []backend.Driver{backend.SQLite{}}

// testContext bounds what a test waits for by the test's own deadline
// (see package testctx).
func testContext(t *testing.T) context.Context {
	t.Helper()
	return testctx.Context(t)
}

// hangBound is how long from now a test may wait.
func hangBound(t *testing.T) time.Duration {
	t.Helper()
	return testctx.Bound(t)
}

func tempDBPath(t *testing.T) string {
	t.Helper()
	return filepath.Join(t.TempDir(), "leases.db")
}

func openStore(t *testing.T, path string) *sqlite.Store {
	t.Helper()
	store, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	t.Cleanup(func() { _ = store.Close() })
	return store
}

func newStore(t *testing.T) *sqlite.Store {
	t.Helper()
	return openStore(t, tempDBPath(t))
}

func mustAcquire(t *testing.T, a leases.Authority, resource, holder string, now, ttl int64) leases.Lease {
	t.Helper()
	lease, err := a.Acquire(context.Background(), resource, holder, now, ttl)
	if err != nil {
		t.Fatalf("acquire %s for %s at %d: %v", resource, holder, now, err)
	}
	return lease
}

// sqliteBackend is a fresh SQLite store as the contract sees it; its state
// is every row of every table, read through a connection of its own.
func sqliteBackend(t *testing.T) contract.Backend {
	t.Helper()
	path := tempDBPath(t)
	s := openStore(t, path)
	return contract.Backend{
		Authority: s.Authority(),
		Fenced:    s.Receiver(leases.Fenced),
		Unfenced:  s.Receiver(leases.Unfenced),
		Guarded:   s.Guarded(),
		Receiver:  s.Receiver,
		State:     func(t *testing.T) string { return dumpTables(t, path) },
	}
}

// openFileDirectly opens the store's file with the driver alone, as the
// store does: one connection, immediate transactions, a busy timeout.
func openFileDirectly(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", fmt.Sprintf("%s?_txlock=immediate&_pragma=busy_timeout(%d)", path, sqlite.DefaultBusyTimeout.Milliseconds()))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	return db
}

// dumpTables renders every row of every table, through a connection of its
// own, so a test can show that an operation changed nothing.
func dumpTables(t *testing.T, path string) string {
	t.Helper()
	db := openFileDirectly(t, path)
	defer db.Close()
	var out strings.Builder
	for _, query := range []string{
		`SELECT resource, epoch, holder, granted_at, expires_at, last_tick FROM authority_leases ORDER BY resource`,
		`SELECT resource, epoch, value_epoch, value FROM receiver_records ORDER BY resource`,
		`SELECT resource, epoch, value FROM unfenced_records ORDER BY resource`,
		`SELECT resource, epoch, value_epoch, value FROM guarded_records ORDER BY resource`,
	} {
		rows, err := db.Query(query)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&out, "%q\n", vals)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			t.Fatal(err)
		}
	}
	return out.String()
}

// isBusy reports whether err is SQLite's "database is locked".
func isBusy(err error) bool {
	var sqliteErr *sqlitedriver.Error
	return errors.As(err, &sqliteErr) && sqliteErr.Code()&0xff == 5 // SQLITE_BUSY
}

// skipWithoutStop skips t where a worker cannot be paused (see
// worker.CanStop: Windows has no SIGSTOP), saying so in one line.
func skipWithoutStop(t *testing.T) {
	t.Helper()
	if err := worker.CanStop(); err != nil {
		t.Skip("skipped: " + err.Error())
	}
}

// signalProcess sends sig to the process pid, which need not be a child.
func signalProcess(pid int, sig os.Signal) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return errors.Join(p.Signal(sig), p.Release())
}

// runScenario runs one named scenario and reports its workers' pids.
func runScenario(t *testing.T, name string) (scenario.Scenario, map[string]int) {
	t.Helper()
	skipWithoutStop(t)
	pids := map[string]int{}
	sc, err := scenario.RunByName(testContext(t), backend.SQLite{}, name, scenario.Options{
		WorkerStarted: func(_, worker string, pid int) { pids[worker] = pid },
	})
	if err != nil {
		t.Fatal(err)
	}
	if pids["A"] == 0 || pids["B"] == 0 || pids["A"] == pids["B"] || pids["A"] == os.Getpid() || pids["B"] == os.Getpid() {
		t.Fatalf("workers A and B must be two processes other than the test's (%d): %v", os.Getpid(), pids)
	}
	return sc, pids
}

// findStep returns the n-th (from 1) step of actor doing operation.
func findStep(t *testing.T, sc scenario.Scenario, actor, operation string, n int) scenario.Step {
	t.Helper()
	for _, s := range sc.Steps {
		if s.Actor == actor && s.Operation == operation {
			n--
			if n == 0 {
				return s
			}
		}
	}
	t.Fatalf("scenario %s has no such step: %s %s", sc.Name, actor, operation)
	return scenario.Step{}
}

// startWorker starts a worker process on path, ending it when the test
// ends; env adds KEY=value entries to its environment.
func startWorker(t *testing.T, ctx context.Context, name, path string, env ...string) *worker.Worker {
	t.Helper()
	w, err := worker.Start(ctx, name, worker.Options{Backend: "sqlite", Address: path, Env: env})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Kill)
	return w
}

// committedResults is results.json as committed.
func committedResults(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile("results.json")
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// writeFile writes content to name in dir and returns its path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// smallBounds keep a run's exploration tiny, for tests of the command that
// are about where its output goes or how it is checked, not what it says.
var smallBounds = []string{"--workers", "1", "--ttl", "1", "--last-tick", "1"}

// smallRun is the document that a run with smallBounds writes, made once
// for this test binary and shared by the tests that tamper with a document
// or write one somewhere odd: its rerun takes a fraction of a full run's
// time, since the exploration at the default bounds is the costliest part
// of the suite (under -race most of all). The full run is
// TestCommandReproducesResultsJSON's.
func smallRun(t *testing.T) string {
	t.Helper()
	skipWithoutStop(t)
	builtCommand(t) // outside the once: it may skip t
	small.once.Do(func() {
		code, doc, stderr := runCommand(t, append(smallBounds, "--output", "-")...)
		if code != command.ExitMatch || doc == "" {
			small.err = fmt.Errorf("a run with small bounds: exit %d, %d bytes; stderr:\n%s", code, len(doc), stderr)
			return
		}
		small.doc = doc
	})
	if small.doc == "" && small.err == nil {
		small.err = errors.New("the run with small bounds failed in another test")
	}
	if small.err != nil {
		t.Fatal(small.err)
	}
	return small.doc
}

var small struct {
	once sync.Once
	doc  string
	err  error
}

// checkTampered runs the command with --check on content, and args, and
// returns its exit status and the last line it printed on stderr.
func checkTampered(t *testing.T, content string, args ...string) (code int, lastLine string) {
	t.Helper()
	path := writeFile(t, t.TempDir(), "tampered.json", content)
	args = append(args, "--check", path, "--output", filepath.Join(t.TempDir(), "out.json"))
	code, _, stderr := runCommand(t, args...)
	return code, stderr[strings.LastIndex(strings.TrimSuffix(stderr, "\n"), "\n")+1:]
}

// runCommand runs cmd/run-experiment, built once for this test binary (see
// builtCommand), as the README's command runs it: on SQLite and on etcd.
// Its --timeout is the test's hang bound (a case's own --timeout, later in
// args, wins).
func runCommand(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut strings.Builder
	cmd := exec.CommandContext(testContext(t), builtCommand(t), append([]string{"--timeout", hangBound(t).String()}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("run-experiment: %v; stderr:\n%s", err, errOut.String())
	}
	return code, out.String(), errOut.String()
}

// The command, built once for all the tests of this binary, in a directory
// that TestMain removes.
var (
	commandOnce  sync.Once
	commandDir   string
	commandPath  string
	commandBuild error
	// packageDir is where go test started the tests, before any test's
	// t.Chdir: the build runs there, whichever test asks first.
	packageDir, packageDirErr = os.Getwd()
)

// builtCommand builds ./cmd/run-experiment, a module of its own that the
// workspace (go.work) joins to this one, with the go command that runs
// these tests, and returns the binary's path. Without the workspace
// (GOWORK=off, or the root module copied alone, as a SQLite-only user
// has it) the command is not part of the build, and the tests that run it
// skip, saying so in one line.
func builtCommand(t *testing.T) string {
	t.Helper()
	commandOnce.Do(func() {
		if packageDirErr != nil {
			commandBuild = packageDirErr
			return
		}
		goEnv := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "env", "GOWORK")
		goEnv.Dir = packageDir
		gowork, err := goEnv.Output()
		if err != nil {
			commandBuild = fmt.Errorf("go env GOWORK: %w", err)
			return
		}
		if strings.TrimSpace(string(gowork)) == "" || strings.TrimSpace(string(gowork)) == "off" {
			commandBuild = errNoWorkspace
			return
		}
		if commandDir, commandBuild = os.MkdirTemp("", "leases-command-"); commandBuild != nil {
			return
		}
		commandPath = filepath.Join(commandDir, "run-experiment")
		if runtime.GOOS == "windows" {
			commandPath += ".exe" // or Windows will not run it
		}
		build := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", commandPath, "./cmd/run-experiment")
		build.Dir = packageDir
		if out, err := build.CombinedOutput(); err != nil {
			commandBuild = fmt.Errorf("go build ./cmd/run-experiment: %w\n%s", err, out)
		}
	})
	if errors.Is(commandBuild, errNoWorkspace) {
		t.Skip(commandBuild)
	}
	if commandBuild != nil {
		t.Fatal(commandBuild)
	}
	return commandPath
}

// errNoWorkspace is why the command's tests skip outside the workspace.
var errNoWorkspace = errors.New("skipped: the command is a module of its own (cmd/run-experiment), built only in the repository's workspace (go.work)")
