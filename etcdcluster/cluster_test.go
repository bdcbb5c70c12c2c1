package etcdcluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"

	"leases/internal/roles"
	"leases/testkit/stracetest"
	"leases/testkit/testctx"
)

func TestMain(m *testing.M) {
	roles.Run()
	os.Exit(roles.CheckUnused(m.Run()))
}

// testContext bounds a test's waits by its deadline, less a margin so that
// a hang fails with a message (testctx.Context).
func testContext(t *testing.T) context.Context { return testctx.Context(t) }

func startCluster(t *testing.T, opts Options) *Cluster {
	t.Helper()
	start := time.Now()
	c, err := Start(testContext(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d members ready, leader elected: %v", c.Members(), time.Since(start))
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func put(t *testing.T, client *clientv3.Client, key, value string) {
	t.Helper()
	if _, err := client.Put(testContext(t), key, value); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}

// getFrom reads key from member i alone, linearizably: i answers only
// once it has applied everything committed before the read.
func getFrom(t *testing.T, c *Cluster, i int, key string) string {
	t.Helper()
	only, err := c.MemberClient(testContext(t), i)
	if err != nil {
		t.Fatal(err)
	}
	defer only.Close()
	resp, err := only.Get(testContext(t), key)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("member %d reads %s: %v, %v", i, key, resp, err)
	}
	return string(resp.Kvs[0].Value)
}

// A killed member loses nothing that was committed, the others elect a
// leader without it, and once restarted it serves what was written
// meanwhile. A member the harness kills is no failure. Nothing the cluster
// started runs after Close, and its directory is gone.
func TestKillRestartAndClose(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx := testContext(t)
	c, err := Start(ctx, Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	client, err := c.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	put(t, client, "before", "1")
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := c.PID(leader)
	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	if _, up := c.PID(leader); up {
		t.Fatalf("member %d still up after Kill", leader)
	}
	next, err := c.Leader(ctx)
	if err != nil || next == leader {
		t.Fatalf("leader after killing member %d: %d, %v", leader, next, err)
	}
	put(t, client, "during", "2")
	if err := c.Restart(ctx, leader); err != nil {
		t.Fatal(err)
	}
	if again, _ := c.PID(leader); again == pid {
		t.Fatalf("the restarted member has the killed one's pid %d", pid)
	}
	for key, want := range map[string]string{"before": "1", "during": "2"} {
		if got := getFrom(t, c, leader, key); got != want {
			t.Fatalf("restarted member %d reads %s = %q; want %q", leader, key, got, want)
		}
	}
	if err := c.Err(); err != nil {
		t.Fatalf("a member the harness killed counts as a failure: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(c.dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the cluster's directory is left after Close: %v", err)
	}
	if _, err := c.Client(ctx); err == nil {
		t.Fatal("a closed cluster handed out a client")
	}
}

// Each member's client URL is its own, and a member client reaches only
// that member.
func TestEndpointsAndMemberClients(t *testing.T) {
	ctx := testContext(t)
	c := startCluster(t, Options{Dir: t.TempDir()})
	endpoints := c.Endpoints()
	seen := map[string]bool{}
	for i, endpoint := range endpoints {
		if seen[endpoint] {
			t.Fatalf("endpoint %s twice in %v", endpoint, endpoints)
		}
		seen[endpoint] = true
		client, err := c.MemberClient(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		if got := client.Endpoints(); len(got) != 1 || got[0] != endpoint {
			t.Fatalf("member %d's client talks to %v, want [%s]", i, got, endpoint)
		}
		status, err := client.Status(ctx, endpoint)
		if err != nil {
			t.Fatal(err)
		}
		if status.Header.MemberId != c.ID(i) {
			t.Fatalf("endpoint %s is member %x, want member %d (%x)", endpoint, status.Header.MemberId, i, c.ID(i))
		}
	}
	if _, err := c.MemberClient(ctx, len(endpoints)); err == nil {
		t.Fatal("a client of a member that does not exist")
	}
}

// A partitioned leader is cut off both ways: the others elect a new
// leader (its heartbeats do not reach them), and it does not learn of the
// new leader (their messages do not reach it) until Heal; then it follows
// the new leader and serves what was written meanwhile.
func TestPartitionCutsAMemberOffBothWays(t *testing.T) {
	ctx := testContext(t)
	c := startCluster(t, Options{Dir: t.TempDir()})
	client, err := c.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	old, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Partition(old); err != nil {
		t.Fatal(err)
	}
	next, err := c.Leader(ctx)
	if err != nil || next == old {
		t.Fatalf("leader after partitioning member %d: %d, %v", old, next, err)
	}
	// The majority commits without the cut-off member.
	majority, err := c.MemberClient(ctx, next)
	if err != nil {
		t.Fatal(err)
	}
	put(t, majority, "during", "partition")
	c.mu.Lock()
	view := c.members[old].view
	c.mu.Unlock()
	if view == c.members[next].id {
		t.Fatalf("the cut-off member %d learnt of the new leader %d during the partition", old, next)
	}
	if err := c.Heal(); err != nil {
		t.Fatal(err)
	}
	// Once healed, the old leader follows the new one.
	for {
		c.mu.Lock()
		view, changed := c.members[old].view, c.changed
		c.mu.Unlock()
		if view != c.members[old].id {
			break
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("member %d still names itself leader after Heal", old)
		}
	}
	if got := getFrom(t, c, old, "during"); got != "partition" {
		t.Fatalf("member %d reads %q after Heal; want the write made during the partition", old, got)
	}
	put(t, client, "after", "heal")
}

// A paused leader is replaced; continued, it follows the new leader.
func TestPauseAndContinue(t *testing.T) {
	ctx := testContext(t)
	c := startCluster(t, Options{Dir: t.TempDir()})
	old, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Pause(old); errors.Is(err, errors.ErrUnsupported) {
		t.Skip(err)
	} else if err != nil {
		t.Fatal(err)
	}
	next, err := c.Leader(ctx)
	if err != nil || next == old {
		t.Fatalf("leader after pausing member %d: %d, %v", old, next, err)
	}
	if err := c.Continue(old); err != nil {
		t.Fatal(err)
	}
	majority, err := c.MemberClient(ctx, next)
	if err != nil {
		t.Fatal(err)
	}
	put(t, majority, "k", "v")
	if got := getFrom(t, c, old, "k"); got != "v" {
		t.Fatalf("continued member %d reads %q; want v", old, got)
	}
}

// A member that ends without the harness asking (here killed from
// outside) is a member down and the cluster's failure, naming it; the
// caller goes on.
func TestMemberEndingUnbiddenIsAFailure(t *testing.T) {
	c := startCluster(t, Options{Dir: t.TempDir(), Members: 1})
	pid, _ := c.PID(0)
	p, err := os.FindProcess(pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Failed():
	case <-testContext(t).Done():
		t.Fatal("a member killed from outside did not fail the cluster")
	}
	if err := c.Err(); err == nil || !strings.Contains(err.Error(), "member m0 (pid "+strconv.Itoa(pid)+") ended unbidden") {
		t.Fatalf("Err() = %v; want it to name member m0 and its pid", err)
	}
	if _, up := c.PID(0); up {
		t.Fatal("the failed member counts as up")
	}
}

// Write-ahead log segments are preallocated at WALSegmentBytes, not 64 MB.
func TestSmallWALSegments(t *testing.T) {
	c := startCluster(t, Options{Dir: t.TempDir(), Members: 1})
	segments, err := filepath.Glob(filepath.Join(c.dir, "m0", "member", "wal", "*"))
	if err != nil || len(segments) == 0 {
		t.Fatalf("no WAL segments: %v", err)
	}
	for _, s := range segments {
		info, err := os.Stat(s)
		if err != nil {
			t.Fatal(err)
		}
		if info.Size() > WALSegmentBytes {
			t.Errorf("%s is %d bytes; want at most %d", s, info.Size(), WALSegmentBytes)
		}
	}
}

// ownerRole is a parent of a cluster that the test can kill: it starts a
// one-member cluster under the directory in its argument, pauses the
// member if asked, prints the member's pid and waits for its input to end.
var ownerRole = roles.Register("etcdcluster-test-owner", func(args []string) int {
	c, err := Start(context.Background(), Options{Dir: args[0], Members: 1})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	pid, _ := c.PID(0)
	if args[1] == "pause" {
		if err := c.Pause(0); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	fmt.Println(pid)
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
})

// A cluster whose parent is killed leaves no member behind, not even a
// paused one (the parent-death signal; Linux only), and the next Start
// under the same directory sweeps the data the killed run left, while
// it leaves a live cluster's alone.
func TestKilledParentLeavesNoMemberAndIsSwept(t *testing.T) {
	for _, how := range []string{"run", "pause"} {
		t.Run(how, func(t *testing.T) {
			if how == "pause" && runtime.GOOS != "linux" {
				ownerRole.MaySkip()
				t.Skip("a paused member outlives a killed parent where there is no parent-death signal (not Linux)")
			}
			dir := t.TempDir()
			live := startCluster(t, Options{Dir: dir, Members: 1})
			killOwner(t, dir, how)
			left, _ := filepath.Glob(filepath.Join(dir, dirPattern+lockSuffix))
			if len(left) != 2 { // the live cluster's and the killed run's
				t.Fatalf("under %s: %v; want the live cluster's directory and the killed run's", dir, left)
			}
			removed, err := Sweep(dir)
			if err != nil || len(removed) != 1 || removed[0] == live.dir {
				t.Fatalf("Sweep removed %v, %v; want the killed run's directory only", removed, err)
			}
			if _, err := os.Stat(live.dir); err != nil {
				t.Fatalf("the live cluster's directory: %v", err)
			}
		})
	}
}

// killOwner starts the owner role, which starts a cluster under dir (and
// pauses its member if how is "pause"), kills it with SIGKILL once it has
// printed its member's pid, and returns once every process of that run
// has exited: each holds an inherited pipe open, whose read end reaches
// end-of-file only when all are gone.
func killOwner(t *testing.T, dir, how string) {
	t.Helper()
	ctx := testContext(t)
	cmd, err := ownerRole.Command(dir, how)
	if err != nil {
		t.Fatal(err)
	}
	allGone, heldByEveryone, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer allGone.Close()
	cmd.ExtraFiles = []*os.File{heldByEveryone}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err = cmd.Start()
	heldByEveryone.Close()
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("owner: %v; stderr: %s", err, stderr.String())
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	deadline, _ := ctx.Deadline()
	if err := allGone.SetReadDeadline(deadline); err != nil {
		t.Fatal(err)
	}
	if n, err := allGone.Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) {
		if pid, err := strconv.Atoi(strings.TrimSpace(line)); err == nil {
			if member, err := os.FindProcess(pid); err == nil {
				_ = member.Kill()
			}
		}
		t.Fatalf("member %s outlived its killed parent: waiting for it got %d bytes, %v", strings.TrimSpace(line), n, err)
	}
}

// Under a wrapper (strace here), Kill ends the member and the wrapper
// follows with the member's death: no failure. A member that dies by
// itself under it is one.
func TestWrappedMemberEnds(t *testing.T) {
	strace := stracetest.Path(t)
	wrap := func(int) []string { return []string{strace, "-f", "-o", os.DevNull} }
	c := startCluster(t, Options{Dir: t.TempDir(), Members: 1, Wrap: wrap})
	if err := c.Kill(0); err != nil {
		t.Fatal(err)
	}
	if err := c.Err(); err != nil {
		t.Fatalf("a wrapped member killed by the harness counts as a failure: %v", err)
	}
	if err := c.Restart(testContext(t), 0); err != nil {
		t.Fatal(err)
	}
	pid, _ := c.PID(0)
	if p, err := os.FindProcess(pid); err != nil || p.Kill() != nil {
		t.Fatalf("kill member %d from outside: %v", pid, err)
	}
	select {
	case <-c.Failed():
	case <-testContext(t).Done():
		t.Fatal("a wrapped member killed from outside did not fail the cluster")
	}
}
