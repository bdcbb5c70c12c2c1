package scale_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/client/v3/concurrency"

	"leases/session"
	"leases/testkit/testctx"
)

// TestScaleSessions is the steady state that TestScale's rounds leave
// out: L sessions (package session, as a user holds leases) in P
// processes, each renewing on its own schedule, and what the backend
// receives per process and renewal beat while nothing but renewals
// happens. TestScale's round renews every lease at once, which is the
// best case for batching; here the sessions were granted one after
// another, as jobs arrive, so their renewals fall where the session's
// schedule puts them. Beside it the anchor: etcd's concurrency.Session,
// whose one keep-alive loop renews all of a process's mutexes.
//
// Every session has a TTL of 6 s and renews every 2 s; the window is
// three beats (6 s) after the last grant. Requests are counted as in
// TestScale. It runs with LEASES_SCALE set, like TestScale, on the grid
// LEASES_SCALE_SESSIONS ("L:H:P,...", default 1000:50:4,10000:200:4)
// and the backends of LEASES_SCALE_BACKENDS among etcd, postgres and
// etcd-session; LEASES_SCALE_SESSIONS_OUT names a JSON file for the rows.
func TestScaleSessions(t *testing.T) {
	if os.Getenv("LEASES_SCALE") == "" {
		t.Skip("the scale benchmark runs with LEASES_SCALE=1 (docs/performance.md)")
	}
	grid, err := parseGrid(cmpOr(os.Getenv("LEASES_SCALE_SESSIONS"), "1000:50:4,10000:200:4"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testctx.Context(t)
	var rows []steadyRow
	for _, name := range strings.Split(cmpOr(os.Getenv("LEASES_SCALE_BACKENDS"), "etcd,postgres,etcd-session"), ",") {
		open, ok := steadyBackends[name]
		if !ok {
			continue // a backend of TestScale's only
		}
		for i, c := range grid {
			t.Run(fmt.Sprintf("%s/L=%d/H=%d/P=%d", name, c.leases, c.holders, c.processes), func(t *testing.T) {
				s := open(t, c.processes, 100+i)
				r, err := steady(ctx, s, c)
				if err != nil {
					t.Fatal(err)
				}
				r.Backend = name
				t.Logf("%+v", r)
				rows = append(rows, r)
			})
		}
	}
	writeRows(t, "LEASES_SCALE_SESSIONS_OUT", rows)
}

const (
	steadyTTL   = 6 * time.Second
	steadyEvery = 2 * time.Second
	steadyBeats = 3
)

// steadyRow is one line of TestScaleSessions' output.
type steadyRow struct {
	Backend   string `json:"backend"`
	Leases    int    `json:"leases"`
	Holders   int    `json:"holders"`
	Processes int    `json:"processes"`
	// GrantSeconds is how long the L grants took: the span the sessions'
	// schedules are spread over.
	GrantSeconds float64 `json:"grant_seconds"`
	// Per process and beat (RenewEvery), in the window.
	RequestsPerBeat float64 `json:"requests_per_process_beat"`
	BytesPerBeat    float64 `json:"bytes_per_process_beat"` // -1 where not counted
	// RenewalsPerBeat is the renewals confirmed per beat, all processes.
	RenewalsPerBeat float64 `json:"renewals_per_beat"`
	Failed          int64   `json:"failed_renewals"` // in the window
	Ended           int64   `json:"ended"`           // sessions that ended in the window
}

// steadySubject is P processes' ways to start L sessions, and what
// counts their requests.
type steadySubject struct {
	start    []func(ctx context.Context, resource, holder string, opts session.Options) (func(context.Context) error, error)
	requests func(context.Context) (n, bytes int64, err error)
	counted  bool // bytes counted
}

var steadyBackends = map[string]func(t *testing.T, processes, i int) steadySubject{
	"etcd":         func(t *testing.T, p, i int) steadySubject { return lessorSessions(openEtcd(t, p, i), true) },
	"postgres":     func(t *testing.T, p, i int) steadySubject { return lessorSessions(openPostgres(t, p, i), false) },
	"etcd-session": steadyEtcdSession,
}

// lessorSessions starts each lease as a session on its process's Lessor;
// what it returns closes the session (its release).
func lessorSessions(s subject, bytes bool) steadySubject {
	out := steadySubject{requests: s.requests, counted: bytes}
	for _, p := range s.procs {
		lessor := p.(lessorProc).lessor
		out.start = append(out.start, func(ctx context.Context, resource, holder string, opts session.Options) (func(context.Context) error, error) {
			sn, err := session.Start(ctx, lessor, resource, holder, opts)
			if err != nil {
				return nil, err
			}
			return sn.Close, nil
		})
	}
	return out
}

// steadyEtcdSession is the anchor: a concurrency.Session of the steady
// TTL per process, a mutex per lease; the session's own loop keeps its
// lease alive.
func steadyEtcdSession(t *testing.T, processes, i int) steadySubject {
	clients, c := etcdClients(t, processes)
	out := steadySubject{requests: c.requests, counted: true}
	for _, client := range clients {
		s, err := concurrency.NewSession(client, concurrency.WithTTL(int(steadyTTL/time.Second)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		prefix := fmt.Sprintf("/scale-steady-session/%d/", i)
		out.start = append(out.start, func(ctx context.Context, resource, _ string, _ session.Options) (func(context.Context) error, error) {
			m := concurrency.NewMutex(s, prefix+resource)
			if err := m.Lock(ctx); err != nil {
				return nil, err
			}
			return m.Unlock, nil
		})
	}
	return out
}

func steady(ctx context.Context, s steadySubject, c config) (steadyRow, error) {
	r := steadyRow{Leases: c.leases, Holders: c.holders, Processes: c.processes}
	var renewed, failed, ended atomic.Int64
	var counting atomic.Bool
	opts := session.Options{TTL: steadyTTL, RenewEvery: steadyEvery, OnEvent: func(ev session.Event) {
		if !counting.Load() {
			return
		}
		switch ev.Kind {
		case session.Renewed:
			renewed.Add(1)
		case session.RenewalFailed:
			failed.Add(1)
		case session.Ended:
			ended.Add(1)
		}
	}}
	closers := make([]func(context.Context) error, c.leases)
	began := time.Now()
	err := forHolders(c, func(holder, i int) error {
		var err error
		closers[i], err = s.start[holder%len(s.start)](ctx, fmt.Sprintf("job-%05d", i), fmt.Sprintf("worker-%03d", holder), opts)
		return err
	})
	defer func() { // the releases, not measured
		_ = forHolders(c, func(_, i int) error {
			if closers[i] != nil {
				_ = closers[i](context.WithoutCancel(ctx))
			}
			return nil
		})
	}()
	if err != nil {
		return r, fmt.Errorf("grants: %w", err)
	}
	r.GrantSeconds = time.Since(began).Seconds()
	n0, b0, err := s.requests(ctx)
	if err != nil {
		return r, err
	}
	counting.Store(true)
	window := time.NewTimer(steadyBeats * steadyEvery) // the measurement's span, not an order
	select {
	case <-window.C:
	case <-ctx.Done():
		return r, context.Cause(ctx)
	}
	counting.Store(false)
	n1, b1, err := s.requests(ctx)
	if err != nil {
		return r, err
	}
	beats := float64(steadyBeats * c.processes)
	r.RequestsPerBeat = float64(n1-n0) / beats
	r.BytesPerBeat = -1
	if s.counted {
		r.BytesPerBeat = float64(b1-b0) / beats
	}
	r.RenewalsPerBeat = float64(renewed.Load()) / steadyBeats
	r.Failed, r.Ended = failed.Load(), ended.Load()
	return r, nil
}
