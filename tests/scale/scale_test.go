package scale_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"leases/testkit/testctx"
)

// The scale benchmark: H holders in P processes keep L leases on one
// backend, and the benchmark measures what a user sizing a lease service
// asks:
//
//   - grants per second: the H holders acquire the L leases, L/H each,
//     one after another;
//   - a renewal round: every held lease renewed once, all at once (the
//     sessions of a process renewing at one beat), its wall time, the
//     requests and bytes it sent (etcd: gRPC messages the clients sent,
//     and the bytes of every message both ways; PostgreSQL: statements
//     the server ran, from pg_stat_statements), and this process's CPU
//     per renewal;
//   - p50 and p99 of Acquire and of a guarded write (a tenure's Tx on
//     SQLite and PostgreSQL; a fenced receiver's Write on etcd, which has
//     no transaction of the user's);
//   - the heap this process keeps per held lease.
//
// A renewal that fails is counted (round_errors), not fatal: a round that
// overloads the cluster is a result.
//
// A "process" is a store of its own (its own etcd client, its own
// database handle), in this one test process: the etcd members and the
// PostgreSQL server are processes of their own, so the CPU column is
// the client's (on SQLite, the whole database's).
//
// It is not part of the default run:
//
//	LEASES_SCALE=1 LEASES_SCALE_OUT=$PWD/docs/scale.json go test -run TestScale -timeout 30m ./tests/scale
//
// LEASES_SCALE is "1" for the default grid, or a grid of its own:
// "L:H:P,..." (for example "1000:50:4"); LEASES_SCALE_BACKENDS names
// the backends to run (default: sqlite,postgres,etcd,etcd-session,etcd-txn).
func TestScale(t *testing.T) {
	spec := os.Getenv("LEASES_SCALE")
	if spec == "" {
		t.Skip("the scale benchmark runs with LEASES_SCALE=1 (docs/performance.md)")
	}
	grid, err := parseGrid(spec)
	if err != nil {
		t.Fatal(err)
	}
	names := strings.Split(cmpOr(os.Getenv("LEASES_SCALE_BACKENDS"), "sqlite,postgres,etcd,etcd-session,etcd-txn"), ",")
	ctx := testctx.Context(t)
	var rows []row
	for _, name := range names {
		open, ok := backends[name]
		if !ok {
			t.Fatalf("LEASES_SCALE_BACKENDS: no backend %q", name)
		}
		for i, c := range grid {
			t.Run(fmt.Sprintf("%s/L=%d/H=%d/P=%d", name, c.leases, c.holders, c.processes), func(t *testing.T) {
				s := open(t, c.processes, i)
				r, err := measure(ctx, s, c)
				if err != nil {
					t.Fatal(err)
				}
				r.Backend = name
				t.Logf("%+v", r)
				rows = append(rows, r)
			})
		}
	}
	writeRows(t, "LEASES_SCALE_OUT", rows)
}

// writeRows writes rows as JSON to the file the environment variable
// env names, if any.
func writeRows(t *testing.T, env string, rows any) {
	out := os.Getenv(env)
	if out == "" {
		return
	}
	data, err := json.MarshalIndent(rows, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, append(data, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

func cmpOr(s, fallback string) string {
	if s == "" {
		return fallback
	}
	return s
}

// config is one point of the grid.
type config struct{ leases, holders, processes int }

// defaultGrid runs in a few minutes on two cores.
var defaultGrid = []config{{100, 10, 2}, {1000, 50, 4}, {10000, 200, 4}}

func parseGrid(spec string) ([]config, error) {
	if spec == "1" {
		return defaultGrid, nil
	}
	var grid []config
	for point := range strings.SplitSeq(spec, ",") {
		var n [3]int
		parts := strings.Split(point, ":")
		if len(parts) != 3 {
			return nil, fmt.Errorf("LEASES_SCALE: %q is not L:H:P", point)
		}
		for i, p := range parts {
			v, err := strconv.Atoi(p)
			if err != nil || v < 1 {
				return nil, fmt.Errorf("LEASES_SCALE: %q is not L:H:P of positive numbers", point)
			}
			n[i] = v
		}
		grid = append(grid, config{n[0], n[1], n[2]})
	}
	return grid, nil
}

// row is one line of the benchmark's output (docs/scale.json).
type row struct {
	Backend       string  `json:"backend"`
	Leases        int     `json:"leases"`
	Holders       int     `json:"holders"`
	Processes     int     `json:"processes"`
	GrantsPerSec  float64 `json:"grants_per_sec"`
	AcquireP50us  float64 `json:"acquire_p50_us"`
	AcquireP99us  float64 `json:"acquire_p99_us"`
	RoundMillis   float64 `json:"round_ms"`       // wall time of one renewal round
	RoundRequests float64 `json:"round_requests"` // per round; -1 where not counted
	RoundBytes    float64 `json:"round_bytes"`    // per round; -1 where not counted
	RenewCPUus    float64 `json:"renew_cpu_us"`   // this process's CPU per renewal
	WriteP50us    float64 `json:"write_p50_us"`
	WriteP99us    float64 `json:"write_p99_us"`
	HeapPerLease  float64 `json:"heap_bytes_per_lease"`
	RoundErrors   int     `json:"round_errors"`   // renewals that failed, in all rounds
	ReleaseErrors int     `json:"release_errors"` // releases that failed (the lease was lost meanwhile)
	// FirstError is the first renewal's error, else the first release's.
	FirstError string `json:"first_error,omitempty"`
}

// subject is a backend opened for one point of the grid: one proc per
// process, and what counts its requests.
type subject struct {
	procs []proc
	// requests returns the requests and bytes so far; nil where none are
	// counted.
	requests func(context.Context) (n, bytes int64, err error)
}

// proc is one process's way to hold, renew, use and release leases.
type proc interface {
	acquire(ctx context.Context, resource, holder string) (held, error)
	renew(ctx context.Context, h held) error
	// guarded prepares a guarded write of h (a tenure, begun untimed) and
	// returns the write itself, which the benchmark times.
	guarded(ctx context.Context, h held) (func(context.Context) error, error)
	release(ctx context.Context, h held) error
}

// held is whatever a proc needs to renew, use and release one lease.
type held any

// renewalRounds is how many rounds are measured; the row has their mean.
const renewalRounds = 3

// writes bounds the guarded writes measured per point.
const writes = 400

func measure(ctx context.Context, s subject, c config) (row, error) {
	r := row{Leases: c.leases, Holders: c.holders, Processes: c.processes}
	resources := make([]string, c.leases)
	for i := range resources {
		resources[i] = fmt.Sprintf("job-%05d", i)
	}
	hs := make([]held, c.leases)
	acquired := make([]time.Duration, c.leases)
	heapBefore := heap()
	began := time.Now()
	err := forHolders(c, func(holder, i int) error {
		p := s.procs[holder%len(s.procs)]
		start := time.Now()
		h, err := p.acquire(ctx, resources[i], fmt.Sprintf("worker-%03d", holder))
		acquired[i] = time.Since(start)
		hs[i] = h
		return err
	})
	if err != nil {
		return r, fmt.Errorf("grants: %w", err)
	}
	r.GrantsPerSec = float64(c.leases) / time.Since(began).Seconds()
	r.HeapPerLease = float64(heap()-heapBefore) / float64(c.leases)
	r.AcquireP50us, r.AcquireP99us = quantiles(acquired)
	if err := renewals(ctx, s, c, hs, &r); err != nil {
		return r, err
	}
	if err := guardedWrites(ctx, s, c, hs, &r); err != nil {
		return r, err
	}
	var mu sync.Mutex
	_ = forHolders(c, func(holder, i int) error {
		if err := s.procs[holder%len(s.procs)].release(ctx, hs[i]); err != nil {
			mu.Lock()
			if r.ReleaseErrors++; r.FirstError == "" {
				r.FirstError = err.Error()
			}
			mu.Unlock()
		}
		return nil
	})
	return r, nil
}

// renewals measures renewalRounds rounds, each every lease renewed once,
// all at once, by its holder's process.
func renewals(ctx context.Context, s subject, c config, hs []held, r *row) error {
	var wall, cpu time.Duration
	var requests, bytes int64
	for range renewalRounds {
		n0, b0, err := count(ctx, s)
		if err != nil {
			return err
		}
		cpu0, start := cpuTime(), time.Now()
		errs := make(chan error, len(hs))
		for i, h := range hs {
			p := s.procs[(i%c.holders)%len(s.procs)]
			go func() { errs <- p.renew(ctx, h) }()
		}
		for range hs {
			if err := <-errs; err != nil {
				r.RoundErrors++
				if r.RoundErrors == 1 {
					r.FirstError = err.Error()
				}
			}
		}
		wall, cpu = wall+time.Since(start), cpu+cpuTime()-cpu0
		n1, b1, err := count(ctx, s)
		if err != nil {
			return err
		}
		requests, bytes = requests+n1-n0, bytes+b1-b0
	}
	r.RoundMillis = float64(wall.Microseconds()) / 1000 / renewalRounds
	r.RenewCPUus = float64(cpu.Microseconds()) / float64(renewalRounds*len(hs))
	r.RoundRequests, r.RoundBytes = -1, -1
	if s.requests != nil {
		r.RoundRequests = float64(requests) / renewalRounds
		r.RoundBytes = float64(bytes) / renewalRounds
	}
	return nil
}

func count(ctx context.Context, s subject) (int64, int64, error) {
	if s.requests == nil {
		return 0, 0, nil
	}
	return s.requests(ctx)
}

// guardedWrites times a guarded write of up to writes leases, by the H
// holders at once.
func guardedWrites(ctx context.Context, s subject, c config, hs []held, r *row) error {
	n := min(writes, len(hs))
	took := make([]time.Duration, n)
	sample := config{leases: n, holders: c.holders, processes: c.processes}
	err := forHolders(sample, func(holder, i int) error {
		write, err := s.procs[holder%len(s.procs)].guarded(ctx, hs[i])
		if err != nil {
			return err
		}
		start := time.Now()
		err = write(ctx)
		took[i] = time.Since(start)
		return err
	})
	if err != nil {
		return fmt.Errorf("guarded writes: %w", err)
	}
	r.WriteP50us, r.WriteP99us = quantiles(took)
	return nil
}

// forHolders runs do for every lease i of c, holder i%H doing its own
// one after another, the H holders at once; the first error wins.
func forHolders(c config, do func(holder, i int) error) error {
	var wg sync.WaitGroup
	errs := make([]error, c.holders)
	for h := range c.holders {
		wg.Go(func() {
			for i := h; i < c.leases; i += c.holders {
				if err := do(h, i); err != nil {
					errs[h] = err
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func quantiles(d []time.Duration) (p50, p99 float64) {
	s := slices.Clone(d)
	slices.Sort(s)
	at := func(q float64) float64 { return float64(s[int(q*float64(len(s)-1))].Nanoseconds()) / 1000 }
	return at(0.50), at(0.99)
}

// heap is the live heap after a collection.
func heap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
