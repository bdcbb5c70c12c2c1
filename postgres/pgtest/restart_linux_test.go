package pgtest_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"leases/postgres/pgtest"
	"leases/testkit/testctx"
)

// A crashed server (the postmaster and every backend killed at once, a
// client inside a transaction) comes back on the same data directory:
// what was committed is there, what was not is not, and the old pids are
// all gone.
func TestCrashAndRestartKeepWhatWasCommitted(t *testing.T) {
	ctx := testctx.Context(t)
	s := pgtest.New(t)
	db := pgtest.Open(t, s, 0)
	if _, err := db.ExecContext(ctx, `CREATE TABLE kept (v text); INSERT INTO kept VALUES ('committed')`); err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO kept VALUES ('open')`); err != nil {
		t.Fatal(err)
	}
	var backend int
	if err := tx.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
		t.Fatal(err)
	}
	postmaster := s.Pid()
	if err := s.Crash(ctx); err != nil {
		t.Fatal(err)
	}
	for _, pid := range []int{postmaster, backend} {
		if state := processState(pid); state != "" && state != "Z" {
			t.Errorf("pid %d still running after Crash: state %s", pid, state)
		}
	}
	if err := tx.Commit(); err == nil {
		t.Fatal("a transaction committed on a crashed server")
	}
	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("restarted and recovered in %v", s.Started)
	var rows []string
	got, err := db.QueryContext(ctx, `SELECT v FROM kept ORDER BY v`)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	for got.Next() {
		var v string
		if err := got.Scan(&v); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, v)
	}
	if len(rows) != 1 || rows[0] != "committed" {
		t.Fatalf("after the restart the table holds %q; want only the committed row", rows)
	}
	if err := s.Restart(ctx); err == nil {
		t.Fatal("Restart of a running server did not fail")
	}
}

// processState is the state letter /proc gives pid ("Z" for a process
// that exited and awaits its reaper), or "" when there is no such process.
func processState(pid int) string {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return fields[0]
}

// A crash while clients keep connecting leaves no backend behind: the
// postmaster may be forking one when it is told to stop, and Crash lists
// its children only once it has stopped. A backend that escaped would
// keep the shared memory attached, and Restart would find it in use.
func TestCrashWhileClientsConnectLeavesNoBackend(t *testing.T) {
	ctx := testctx.Context(t)
	s := pgtest.New(t)
	db := pgtest.Open(t, s, 0)
	db.SetMaxIdleConns(-1) // every query a new connection: the postmaster forks all the time
	load, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for load.Err() == nil {
				_, _ = db.ExecContext(load, `SELECT 1`) // fails while the server is down
			}
		})
	}
	defer wg.Wait()
	defer stop()
	for round := range 20 {
		if err := s.Crash(ctx); err != nil {
			t.Fatalf("crash %d: %v", round, err)
		}
		if err := s.Restart(ctx); err != nil {
			t.Fatalf("restart %d: %v", round, err)
		}
	}
}
