//go:build unix

package leasescmd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"leases/internal/stopwait"
	"leases/testkit/commandtest"
	"leases/testkit/testctx"
)

// pausedTTL is the lease's TTL in runWithLeasesStopped; the session's
// deadline comes 2.397 s after each renewal is sent (TTL less the default
// margin TTL/5 and the drift allowance), renewals every 0.8 s.
const pausedTTL = 3 * time.Second

// runWithLeasesStopped: the leases process of a run is stopped (SIGSTOP)
// for each of stops, shorter than, around and much longer than the TTL,
// and CMD must be gone before the lease can expire, for the watchdog stops
// it at the session's deadline whether or not leases runs. CMD's last
// moment is when the test reads the end of a FIFO that CMD alone holds (a
// moment after CMD's exit); the expiry is the store's record as leases
// holders reads it, once as soon as leases is stopped (nothing renews the
// lease after that: a renewal still on its way only moves the expiry
// later) and once as soon as CMD is gone; on etcd, whose record is the
// whole seconds left, the expiry is bounded below by the moment before
// the read plus those seconds. A stop that ends before the session's
// deadline leaves CMD running; the run then ends with CMD's status 0,
// leases having checked that the session lived to CMD's end. A stop of
// the TTL or longer must see CMD gone while leases is still stopped.
func runWithLeasesStopped(t *testing.T, store []string, stops ...time.Duration) {
	for _, stop := range stops {
		t.Run(stop.String(), func(t *testing.T) {
			r := stopLeases(t, store, stop)
			when := "after the stop"
			if r.killed {
				when = fmt.Sprintf("%v into the stop", r.gone.Sub(r.stopped).Round(time.Millisecond))
			}
			switch {
			case r.code == exitOK && stop < pausedTTL:
				t.Logf("leases stopped %v: CMD ran on under the renewed lease", stop)
			case r.code != exitLost:
				t.Fatalf("run after a stop of %v: %v; want exit 4 (CMD stopped), or 0 (CMD's own, the lease held to CMD's end) for a stop shorter than the TTL", stop, r.result)
			case !r.expiry.known:
				t.Fatalf("the store had no record of the lease as soon as leases was stopped")
			case !r.gone.Before(r.expiry.at):
				t.Errorf("leases stopped %v: CMD gone %s, %v after the lease's expiry (%s)",
					stop, when, r.gone.Sub(r.expiry.at).Round(time.Millisecond), r.expiry.how)
			default:
				t.Logf("leases stopped %v: CMD gone %s, %v before the lease's expiry (%s)",
					stop, when, r.expiry.at.Sub(r.gone).Round(time.Millisecond), r.expiry.how)
			}
			if stop >= pausedTTL && !r.killed {
				t.Errorf("leases stopped %v, as long as the TTL or longer, and CMD was still running at the stop's end", stop)
			}
		})
	}
}

// stopped is what stopLeases saw.
type stopped struct {
	stopped, gone time.Time   // when leases was stopped; when CMD was gone
	killed        bool        // CMD was gone while leases was stopped
	expiry        expiryBound // the lease's expiry, bounded below
	result        commandtest.Result
	code          int
}

// stopLeases runs CMD under a lease with leases stopped for stop once
// CMD has started, and returns what it saw. CMD still running when the
// stop ends is ended by its input's end.
func stopLeases(t *testing.T, store []string, stop time.Duration) stopped {
	ctx := testctx.Context(t)
	fifo := filepath.Join(t.TempDir(), "cmd")
	resource := "paused/" + stop.String()
	var p *commandtest.Process
	held := commandtest.FIFO(t, ctx, fifo, func() {
		p = start(t, append(commandLine(store, "run", resource, "--holder", "A", "--ttl", pausedTTL.String(), "--"),
			commandtest.CMD(t, "fifo-holder", fifo)...)...)
	})
	line, err := held.ReadString('\n')
	var pid int
	if _, serr := fmt.Sscanf(line, "started %d\n", &pid); err != nil || serr != nil {
		t.Fatalf("CMD's first line: %q, %v", line, err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })

	leasesPid := p.Cmd.Process.Pid
	if err := syscall.Kill(leasesPid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := stopwait.Stopped(leasesPid); err != nil {
		t.Fatal(err)
	}
	s := stopped{stopped: time.Now()}
	// The stop's length is the fault's, not an order: the test ends it
	// when it has lasted as long as asked.
	stopEnds := time.NewTimer(stop - time.Since(s.stopped))
	defer stopEnds.Stop()
	gone := make(chan time.Time, 1)
	go func() {
		_, _ = io.Copy(io.Discard, held)
		gone <- time.Now()
	}()
	s.expiry = expiryRead(t, store, resource)
	select {
	case s.gone = <-gone:
		s.killed = true
		s.expiry = s.expiry.latest(expiryRead(t, store, resource))
		<-stopEnds.C
	case <-stopEnds.C:
	case <-ctx.Done():
		t.Fatalf("CMD neither gone nor the stop over: %v", context.Cause(ctx))
	}
	if err := syscall.Kill(leasesPid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if !s.killed {
		if err := p.Stdin.Close(); err != nil {
			t.Fatal(err)
		}
		select {
		case s.gone = <-gone:
		case <-ctx.Done():
			t.Fatalf("CMD not gone after its input ended: %v", context.Cause(ctx))
		}
	}
	s.result = p.Wait()
	s.code = s.result.Code
	if s.killed && !strings.Contains(s.result.Stderr, "leases: run: watchdog: SIGKILL to CMD's process group") {
		t.Errorf("run: %v; want the watchdog's SIGKILL said", s.result)
	}
	return s
}

// expiryBound is the lease's expiry as one read of the store's record
// bounds it from below.
type expiryBound struct {
	known bool
	at    time.Time
	how   string
}

// latest is the later of two bounds, both bounds below the expiry.
func (b expiryBound) latest(o expiryBound) expiryBound {
	if !b.known || (o.known && o.at.After(b.at)) {
		return o
	}
	return b
}

// expiryRead reads the lease on resource as leases holders lists it: its
// expiry where the store records one (SQLite, PostgreSQL), and on etcd
// the moment before the read plus the whole seconds etcd said were left.
// A lease that is not listed has no bound.
func expiryRead(t *testing.T, store []string, resource string) expiryBound {
	t.Helper()
	before := time.Now()
	r := leases(t, commandLine(store, "holders", resource, "--json")...)
	var listed holdersJSON
	if err := json.Unmarshal([]byte(r.Stdout), &listed); err != nil {
		t.Fatalf("holders: %v (%v)", r, err)
	}
	if len(listed.Leases) == 0 {
		return expiryBound{}
	}
	l := listed.Leases[0]
	if listed.AtTheLatest {
		left := time.Duration(*l.ExpiresInMs-1000) * time.Millisecond // etcd: (whole seconds left + 1) s
		return expiryBound{known: true, at: before.Add(left), how: "etcd's whole seconds left, from before the read"}
	}
	at, err := time.Parse(time.RFC3339Nano, l.ExpiresAt)
	if err != nil {
		t.Fatal(err)
	}
	return expiryBound{known: true, at: at, how: "the store's expiry"}
}

// pausedStops are the stops of leases that runWithLeasesStopped tries:
// shorter than the session's deadline, just past it, the TTL, the issue's
// 6.8 s and much longer.
var pausedStops = []time.Duration{time.Second, 2500 * time.Millisecond, pausedTTL, 6800 * time.Millisecond, 10 * time.Second}
