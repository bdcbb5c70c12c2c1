package mcpfence_test

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"leases"
	"leases/internal/stopwait"
	"leases/testkit/childtest"
	"leases/testkit/testctx"
)

// agentTTL is the agents' lease: long enough for an agent's renewals on
// a busy machine, short for the next holder's wait.
const agentTTL = "2s"

// ask sends c one command and reads its reply.
func ask(t *testing.T, c *childtest.Child, command string) reply {
	t.Helper()
	if _, err := fmt.Fprintln(c.In, command); err != nil {
		t.Fatal(err)
	}
	if !c.Lines.Scan() {
		t.Fatalf("%q: the process ended without a reply: %v", command, c.Wait())
	}
	var r reply
	if err := json.Unmarshal(c.Lines.Bytes(), &r); err != nil {
		t.Fatalf("%q: %v", command, err)
	}
	return r
}

// expect checks a call's reply.
func expect(t *testing.T, command string, r reply, outcome leases.Outcome, isError bool) {
	t.Helper()
	if r.Err != "" || r.Outcome != string(outcome) || r.IsError != isError {
		t.Fatalf("%s: %+v; want %s (IsError %v)", command, r, outcome, isError)
	}
}

// stopOutsideTransaction stops c (SIGSTOP) at a moment when it holds no
// write transaction on the SQLite file at path (its session renews in the
// background: stopped inside a renewal, it would keep the next holder out
// of the file): it tries the file's write lock once c has stopped, and
// continues c and stops it again while the lock is taken.
func stopOutsideTransaction(t *testing.T, c *childtest.Child, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_txlock=immediate&_pragma=busy_timeout(0)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	for {
		if err := syscall.Kill(c.Pid(), syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		if err := stopwait.Stopped(c.Pid()); err != nil {
			t.Fatal(err)
		}
		tx, err := db.BeginTx(testctx.Context(t), nil)
		if err == nil {
			_ = tx.Rollback()
			return
		}
		t.Logf("stopped inside a transaction (%v): once more", err)
		if err := syscall.Kill(c.Pid(), syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
	}
}

// startToolServer starts the example's tool server on the database in
// dir, and returns it once it listens, with its endpoint.
func startToolServer(t *testing.T, dir string) (*childtest.Child, string) {
	t.Helper()
	server := childtest.Start(t, serverRole, dir)
	if !server.Lines.Scan() {
		t.Fatalf("the tool server did not start: %v", server.Wait())
	}
	endpoint, ok := strings.CutPrefix(server.Lines.Text(), "listening ")
	if !ok {
		t.Fatalf("the tool server said %q", server.Lines.Text())
	}
	return server, endpoint
}

// The example's tool server and two agents, each a process of its own,
// over the SDK's streamable HTTP transport. Agent A's retried call is
// answered from the record (one line appended), and the same key with
// another note is a conflict (one row). A is then stopped (SIGSTOP) past
// its lease's expiry; B is granted the next epoch and calls. A, continued,
// sends the call it had checked its session for before the pause: the
// server refuses it as stale, naming B's epoch, and appends nothing; A's
// next call through the client is refused before it is sent (its session
// has ended).
func TestAgentsAndToolServerAsProcesses(t *testing.T) {
	dir := t.TempDir()
	server, endpoint := startToolServer(t, dir)
	leasesDB := filepath.Join(dir, "leases.db")
	a := childtest.Start(t, agentRole, leasesDB, endpoint, "A", agentTTL)
	epochA := ask(t, a, "start").Epoch

	for _, step := range []struct {
		command string
		outcome leases.Outcome
		isError bool
	}{
		{`call append_line {"line":"a1"}`, leases.Accepted, false},
		{`call append_line {"line":"a1"}`, leases.Replay, false}, // a retry: the same derived key
		{`call add_note {"text":"n1"} k1`, leases.Accepted, false},
		{`call add_note {"text":"n2"} k1`, leases.Conflict, true},
	} {
		expect(t, step.command, ask(t, a, step.command), step.outcome, step.isError)
	}

	stopOutsideTransaction(t, a, leasesDB)
	b := childtest.Start(t, agentRole, leasesDB, endpoint, "B", agentTTL)
	epochB := ask(t, b, "start").Epoch // granted once A's lease has expired
	if epochB <= epochA {
		t.Fatalf("B's epoch %d, A's %d", epochB, epochA)
	}
	expect(t, "B's call", ask(t, b, `call append_line {"line":"b1"}`), leases.Accepted, false)
	if err := syscall.Kill(a.Pid(), syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}

	late := ask(t, a, `late append_line {"line":"a2"} k2`)
	expect(t, "A's late call", late, leases.Stale, true)
	if late.Newest != epochB || !strings.Contains(late.Text, "stop") {
		t.Fatalf("A's late call: %+v; want stale naming epoch %d, and saying stop", late, epochB)
	}
	if r := ask(t, a, `call append_line {"line":"a3"}`); !r.Ended {
		t.Fatalf("A's call after its session ended: %+v; want refused before sending (session.ErrEnded)", r)
	}

	lines, err := os.ReadFile(filepath.Join(dir, "lines.log"))
	if err != nil {
		t.Fatal(err)
	}
	if string(lines) != "a1\nb1\n" {
		t.Fatalf("the log holds %q; want a1 once (the retry answered from the record), b1, and nothing of A's after B", lines)
	}
	server.In.Close()
	if err := server.Wait(); err != nil {
		t.Fatalf("the tool server: %v", err)
	}
	if notes := countNotes(t, filepath.Join(dir, "tools.db")); notes != 1 {
		t.Fatalf("%d notes; want 1 (the conflicting call wrote none)", notes)
	}
}

// An outside effect whose answer was lost: the tool server is killed
// (SIGKILL) after append_line_then_hang's effect and before its record is
// completed, and started again on the same database. The agent's retry
// of the same call is answered "in progress", for good: the effect is
// unknown to the record, and it is not done a second time.
func TestOutsideEffectWhoseAnswerWasLostIsNeverRepeated(t *testing.T) {
	dir := t.TempDir()
	server, endpoint := startToolServer(t, dir)
	a := childtest.Start(t, agentRole, filepath.Join(dir, "leases.db"), endpoint, "A", agentTTL)
	ask(t, a, "start")
	const command = `call append_line_then_hang {"line":"once"} k`
	if _, err := fmt.Fprintln(a.In, command); err != nil {
		t.Fatal(err)
	}
	if !server.Lines.Scan() || server.Lines.Text() != "effect done <nil>" {
		t.Fatalf("the tool server said %q, want the effect done", server.Lines.Text())
	}
	server.Kill()
	if !a.Lines.Scan() || !strings.Contains(a.Lines.Text(), `"err"`) {
		t.Fatalf("the agent's call to a killed server: %q, want an error", a.Lines.Text())
	}
	_, endpoint = startToolServer(t, dir)
	if r := ask(t, a, "connect "+endpoint); r.Err != "" {
		t.Fatal(r.Err)
	}
	for range 2 {
		r := ask(t, a, command)
		expect(t, "the retry", r, leases.InProgress, true)
	}
	if lines, err := os.ReadFile(filepath.Join(dir, "lines.log")); err != nil || string(lines) != "once\n" {
		t.Fatalf("the log holds %q (%v); want the effect once", lines, err)
	}
}
