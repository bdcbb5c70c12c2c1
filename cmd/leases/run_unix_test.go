//go:build unix

package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite" // the test's own connection to the file

	"leases/clock"
	"leases/testkit/testctx"

	"leases/testkit/commandtest"
)

func init() {
	// stubborn ignores SIGTERM, starts a descendant that ignores it too,
	// in its process group, and both hold the FIFO its argument names
	// open for writing: the test's reader sees the end of it only once
	// both are gone. It says "started PID" on the FIFO and then holds
	// until its input ends (the test's, which ends only at cleanup).
	commandtest.RegisterCMD("stubborn", func(args []string) int {
		signal.Ignore(syscall.SIGTERM)
		if err := leaveDescendant(args[0]); err != nil {
			return fatal(err)
		}
		_, _ = io.Copy(io.Discard, os.Stdin)
		return 0
	})
	// leaver starts a stubborn descendant that holds the FIFO its argument
	// names, says "started PID" on it, and exits 0 at once.
	commandtest.RegisterCMD("leaver", func(args []string) int {
		if err := leaveDescendant(args[0]); err != nil {
			return fatal(err)
		}
		return 0
	})
	commandtest.RegisterCMD("stubborn-descendant", func([]string) int {
		signal.Ignore(syscall.SIGTERM)
		_, _ = io.Copy(io.Discard, os.Stdin) // holding fd 3, the FIFO
		return 0
	})
	// trap says "started", and exits 0 at the first SIGINT or SIGTERM,
	// saying "caught" and which.
	commandtest.RegisterCMD("trap", func([]string) int {
		caught := make(chan os.Signal, 1)
		signal.Notify(caught, syscall.SIGINT, syscall.SIGTERM)
		fmt.Println("started")
		fmt.Printf("caught %v\n", <-caught)
		return 0
	})
}

// leaveDescendant opens the FIFO at path for writing, starts a stubborn
// descendant that holds it too, and says "started PID" on it.
func leaveDescendant(path string) error {
	fifo, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	descendant, err := commandtest.CMDCommand("stubborn-descendant")
	if err != nil {
		return err
	}
	descendant.Stdin, descendant.ExtraFiles = os.Stdin, []*os.File{fifo}
	if err := descendant.Start(); err != nil {
		return err
	}
	_, err = fmt.Fprintf(fifo, "started %d\n", os.Getpid())
	return err
}

func fatal(err error) int {
	fmt.Fprintln(os.Stderr, err)
	return 125
}

// When the lease ends before CMD does, run stops CMD, and everything in
// its process group, before the lease can expire, and exits 4. CMD here
// ignores SIGTERM, and so does the process it started: SIGKILL (from
// run's watchdog at the session's deadline, or from run after the grace
// period) ends both. Three ways the lease is taken away: renewals
// that fail (another connection holds the file's write lock, as a hung
// process would) until the session's deadline; the file deleted (the
// store can renew no more); an operator's release (the next renewal is
// refused). The expiry is the lease's on the store's clock (the machine's)
// as the store last recorded it; the group is gone when the FIFO that
// both processes hold reaches its end.
//
// With renewals failing, the margin is most of the TTL so that load
// cannot fail a correct run: the session ends the TTL less the margin
// (about a second) after its last renewal, and the watchdog's SIGKILL
// comes at that deadline, about 3s before the lease can expire. The
// deleted file and the release end the session at the next renewal, and
// run stops CMD itself (SIGTERM, SIGKILL after the grace), long before
// the watchdog's deadline (a TTL of 8s, its deadline 7s after each
// renewal, renewals every 2.3s): the watchdog says nothing. That slack
// covers the kill taking effect, the FIFO closing and this test waking.
// Without the kill, or with the signals sent to CMD alone, the group
// holds the FIFO until the test's deadline; without run's own stop, the
// watchdog's lines are on stderr.
func TestRunStopsCMDBeforeTheLeaseCanExpire(t *testing.T) {
	cases := []struct {
		name string
		// takeAway takes the lease away from run and returns the tick at
		// which it can expire, and what gives the file back afterwards.
		takeAway func(t *testing.T, ctx context.Context, db string) (expiry int64, giveBack func())
		// timing is run's --ttl and --margin.
		timing []string
		// byLeases: run stops CMD itself, before the watchdog's deadline
		// (with renewals failing, both may act).
		byLeases bool
	}{
		{"renewals fail until the deadline", lockFile, []string{"--ttl", "4s", "--margin", "3s"}, false},
		{"the file is deleted", deleteFile, []string{"--ttl", "8s", "--margin", "1s"}, true},
		{"an operator releases the lease", releaseLease, []string{"--ttl", "8s", "--margin", "1s"}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testctx.Context(t)
			dir := t.TempDir()
			db, fifo := filepath.Join(dir, "leases.db"), filepath.Join(dir, "group")
			var p *commandtest.Process
			group := cmdGroup(t, ctx, fifo, func() {
				args := append(append([]string{"run", "r", "--sqlite", db, "--holder", "h"}, tc.timing...), "--grace", "300ms", "--")
				p = start(t, append(args, commandtest.CMD(t, "stubborn", fifo)...)...)
			})

			expiry, giveBack := tc.takeAway(t, ctx, db)
			if _, err := io.Copy(io.Discard, group); err != nil {
				t.Fatal(err)
			}
			gone := clock.Wall{}.Now()
			giveBack()
			r := p.Wait()
			if gone >= expiry {
				t.Errorf("CMD's process group was gone at %d, %v after the lease could expire (at %d)",
					gone, time.Duration(gone-expiry)*time.Millisecond, expiry)
			} else {
				t.Logf("CMD's process group was gone %v before the lease could expire", time.Duration(expiry-gone)*time.Millisecond)
			}
			if r.Code != exitLost || !strings.Contains(r.Stderr, "leases: run: the lease on r at epoch 1 ended before CMD did") ||
				!strings.Contains(r.Stderr, "CMD was stopped by SIGKILL") {
				t.Fatalf("run: %v; want exit 4, saying the lease ended and that SIGKILL stopped CMD", r)
			}
			if tc.byLeases && strings.Contains(r.Stderr, "watchdog:") {
				t.Fatalf("run: %v; want CMD stopped by run itself, before the watchdog's deadline", r)
			}
		})
	}
}

// cmdGroup is the FIFO at path, made here, as CMD's process group holds
// it (see the roles), once CMD has said "started PID" on it: it reaches
// its end when every process that holds it is gone. The test's cleanup
// kills the group (led by run's watchdog), in case the command failed to.
func cmdGroup(t *testing.T, ctx context.Context, path string, started func()) io.Reader {
	t.Helper()
	group := commandtest.FIFO(t, ctx, path, started)
	line, err := group.ReadString('\n')
	var pid int
	if _, serr := fmt.Sscanf(line, "started %d\n", &pid); err != nil || serr != nil {
		t.Fatalf("CMD's first line: %q, %v", line, err)
	}
	pgid, err := syscall.Getpgid(pid) // the watchdog's: CMD is in its group
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
	return group
}

// lockFile holds the file's write lock in a transaction of the test's
// own, so that every renewal waits for it and fails, and reads in that
// transaction the expiry the store last recorded (authority_leases is
// the SQLite store's table of leases).
func lockFile(t *testing.T, ctx context.Context, db string) (int64, func()) {
	conn, err := sql.Open("sqlite", db+"?_txlock=immediate&_pragma=busy_timeout(60000)")
	if err != nil {
		t.Fatal(err)
	}
	conn.SetMaxOpenConns(1)
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var expiry int64
	if err := tx.QueryRowContext(ctx, `SELECT expires_at FROM authority_leases WHERE resource = 'r'`).Scan(&expiry); err != nil {
		t.Fatal(err)
	}
	return expiry, func() {
		if err := errors.Join(tx.Rollback(), conn.Close()); err != nil {
			t.Error(err)
		}
	}
}

// deleteFile removes the file, its log and its index from under the
// store, after reading the lease's expiry: the next renewal finds the
// file gone, and the session ends at once.
func deleteFile(t *testing.T, _ context.Context, db string) (int64, func()) {
	expiry := expiryOf(t, db)
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Remove(db + suffix); err != nil {
			t.Fatal(err)
		}
	}
	return expiry, func() {}
}

// releaseLease releases h's lease as an operator would: the next renewal
// is refused, and the session ends at once.
func releaseLease(t *testing.T, _ context.Context, db string) (int64, func()) {
	expiry := expiryOf(t, db)
	if r := invoke(t, nil, "release", "r", "--sqlite", db, "--holder", "h", "--epoch", "1"); r.Code != exitOK {
		t.Fatalf("release: %v", r)
	}
	return expiry, func() {}
}

// expiryOf is when r's lease expires, as holders says.
func expiryOf(t *testing.T, db string) int64 {
	t.Helper()
	var listed holdersJSON
	r := invoke(t, nil, "holders", "r", "--sqlite", db, "--json")
	if err := json.Unmarshal([]byte(r.Stdout), &listed); err != nil || len(listed.Leases) != 1 {
		t.Fatalf("holders: %v (%v)", r, err)
	}
	at, err := time.Parse(time.RFC3339Nano, listed.Leases[0].ExpiresAt)
	if err != nil {
		t.Fatal(err)
	}
	return at.UnixMilli()
}

// Signals sent to leases reach CMD (in its process group of its own,
// which no terminal signals), and leases then exits with CMD's status:
// 143 for a CMD that SIGTERM ended, 0 for one that caught SIGINT and
// exited 0. The lease is released when CMD has ended.
func TestRunPassesSignalsOn(t *testing.T) {
	cases := []struct {
		sig    syscall.Signal
		role   string
		status int
		stdout string
	}{
		{syscall.SIGTERM, "hold", 128 + int(syscall.SIGTERM), "started 1\n"},
		{syscall.SIGINT, "trap", 0, "started\ncaught interrupt\n"},
	}
	for _, tc := range cases {
		t.Run(tc.sig.String(), func(t *testing.T) {
			store := "--sqlite=" + sqliteFile(t)
			p := start(t, append([]string{"run", "r", store, "--"}, commandtest.CMD(t, tc.role)...)...)
			p.Expect(p.Stdout, "started")
			if err := p.Cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			if r := p.Wait(); r.Code != tc.status || r.Stdout != tc.stdout || r.Stderr != "" {
				t.Fatalf("run sent %v: %v; want CMD's status %d", tc.sig, r, tc.status)
			}
			if h := invoke(t, nil, "holders", "r", store); !strings.Contains(h.Stdout, "free") {
				t.Fatalf("holders after run: %v; want r free", h)
			}
		})
	}
}

// A signal while run waits for the lease ends the wait: exit 128+N, CMD
// never started.
func TestRunInterruptedWhileWaiting(t *testing.T) {
	store := "--sqlite=" + sqliteFile(t)
	if r := invoke(t, nil, "acquire", "r", store, "--holder", "A", "--ttl", "1h"); r.Code != exitOK {
		t.Fatal(r)
	}
	p := start(t, append([]string{"run", "r", store, "--wait", "--"}, commandtest.CMD(t, "env")...)...)
	p.Expect(p.Stderr, "r is held by A at epoch 1 for ")
	if err := p.Cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	r := p.Wait()
	if r.Code != 128+int(syscall.SIGINT) || r.Stdout != "" ||
		!strings.Contains(r.Stderr, "leases: run: interrupt before the lease on r was granted; CMD was not started") {
		t.Fatalf("run interrupted while waiting: %v; want 130 and CMD never started", r)
	}
}

// When CMD exits, what it left running in its process group is killed
// before the lease is released: nothing of CMD's runs without the lease.
// CMD here exits 0 at once, leaving a process that ignores SIGTERM and
// holds the FIFO until its input (the test's) ends.
func TestRunKillsWhatCMDLeavesBehind(t *testing.T) {
	ctx := testctx.Context(t)
	dir := t.TempDir()
	db, fifo := filepath.Join(dir, "leases.db"), filepath.Join(dir, "group")
	var p *commandtest.Process
	group := cmdGroup(t, ctx, fifo, func() {
		p = start(t, append([]string{"run", "r", "--sqlite", db, "--"}, commandtest.CMD(t, "leaver", fifo)...)...)
	})
	if r := p.Wait(); r.Code != exitOK || r.Stderr != "" {
		t.Fatalf("run: %v; want CMD's status, 0", r)
	}
	if _, err := io.Copy(io.Discard, group); err != nil {
		t.Fatalf("what CMD left behind still holds the FIFO after run ended: %v", err)
	}
}

// When leases is killed (SIGKILL), nothing of the run outlives it: its
// watchdog reads the end of its input and kills CMD's process group,
// itself in it (on Linux the parent-death signal kills CMD at once too).
// CMD holds a FIFO: fifo-holder alone, or stubborn, which ignores SIGTERM
// and has started a process that ignores it too, in its group, which no
// parent-death signal reaches. The watchdog holds leases's stderr, whose
// end the test's Wait awaits.
func TestRunEndsWithLeases(t *testing.T) {
	for _, cmd := range []string{"fifo-holder", "stubborn"} {
		t.Run(cmd, func(t *testing.T) {
			ctx := testctx.Context(t)
			dir := t.TempDir()
			db, fifo := filepath.Join(dir, "leases.db"), filepath.Join(dir, "group")
			var p *commandtest.Process
			group := cmdGroup(t, ctx, fifo, func() {
				p = start(t, append([]string{"run", "r", "--sqlite", db, "--ttl", "1h", "--"}, commandtest.CMD(t, cmd, fifo)...)...)
			})
			if err := p.Cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(io.Discard, group); err != nil {
				t.Fatalf("CMD's group still holds the FIFO after leases was killed: %v", err)
			}
			if r := p.Wait(); !strings.Contains(r.Stderr, "leases: run: watchdog: SIGKILL to CMD's process group: leases is gone") {
				t.Fatalf("leases killed: %v; want the watchdog's SIGKILL said", r)
			}
		})
	}
}
