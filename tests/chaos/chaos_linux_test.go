package chaos_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"leases/fence"
	"leases/testkit/testctx"
	"leases/tests/history"
)

// soakEnv turns the short form into a soak: LEASES_CHAOS_SOAK=DURATION
// runs each variant for that long, and =DURATION,WORKERS with
// that many workers (give go test a -timeout to match).
const soakEnv = "LEASES_CHAOS_SOAK"

// seedEnv replays a run's choices of faults (not its timing).
const seedEnv = "LEASES_CHAOS_SEED"

// doneTolerance is how late a session's Done may close after its
// Deadline in a process that was not stopped meanwhile, beyond the time
// its reference timer could not fire (all of its lateness, stalls where
// they were: starvationMeter): the deadline's timer fires on a
// millisecond tick, and then the session's goroutine and the worker's
// goroutine that records Done must be scheduled, on a two-core machine
// shared by the workers, the database server and the controller
// (measured: at most 10 ms under -race beside four busy loops; see
// docs/reliability.md). It must stay well below the work a worker does
// between two Checks (up to the TTL), or a session whose timer is missing
// would pass, its Done closed by the worker's next Check instead (without
// that timer, each of 6 runs had a Done 105 to 607 ms late beyond the
// starvation, at most); and the late closes the service path must not
// have (issue 15: up to 1,060 ms while a renewal hung) are longer still.
const doneTolerance = 50 * time.Millisecond

// Workers run the service path in a loop while the test stops them after
// Check, between the fence and COMMIT, while they hold the lessor's write
// lock and at random moments, kills them and starts them again, and (on
// PostgreSQL) cuts a transaction off as its COMMIT goes out, its backend
// stopped, for the worker to resolve, and kills the database server and
// restarts it; then every
// safety property is checked on what they recorded and what the
// databases hold, and the history is checked for linearizability.
//
// The variants: the workers' own database is SQLite or PostgreSQL, the
// lessor a SQLite file; or (etcd) the lessor is a three-member etcd
// cluster, whose leader the test cuts off, kills and pauses, and whose
// followers it pauses, and the workers' own database is SQLite; or
// (postgresql-guarded) docs/postgres.md's path: the leases in the same
// PostgreSQL database, on the server's clock, and every transaction
// guarded by the store's Tenure, with the checks of the guard (the
// server keeps commit timestamps for them).
func TestServicePathUnderChaos(t *testing.T) {
	for _, v := range []struct {
		name    string
		dialect fence.Dialect
		etcd    bool
	}{
		{fence.SQLite.String(), fence.SQLite, false},
		{fence.PostgreSQL.String(), fence.PostgreSQL, false},
		{"etcd", fence.SQLite, true},
	} {
		t.Run(v.name, func(t *testing.T) { run(t, config(t, v.dialect, v.etcd)) })
	}
	t.Run("postgresql-guarded", func(t *testing.T) { run(t, guardedConfig(t)) })
}

// config is the short form (seconds), or the soak that soakEnv asks for.
func config(t *testing.T, dialect fence.Dialect, etcd bool) Config {
	ttl := 300 * time.Millisecond
	cfg := Config{
		Workers: 4, Resources: 2, TTL: ttl, TxPerTenure: 3, Work: ttl, Duration: 3 * time.Second, Seed: rand.Uint64(),
		PauseMin: ttl + 50*time.Millisecond, PauseMax: 5 * ttl / 2,
		PauseAfterCheck: 0.05, PauseInTx: 0.04, KillInTx: 0.02, PauseInLessor: 0.25, CommitHeld: 0.04, CommitCut: 0.04, GiveUpAtGrant: 0.1,
		RandomMin: 2 * ttl, RandomMax: 4 * ttl, RandomKill: 0.3,
		CrashMin: 5 * ttl, CrashMax: 10 * ttl,
		// A cluster's fault lasts from a little over a TTL (three
		// election timeouts of etcdcluster's members) to about three, so
		// that the figures show whether the writes follow the election or
		// wait for the fault's end.
		ClusterMin: ttl, ClusterMax: 2 * ttl, ClusterFaultMin: 2 * ttl, ClusterFaultMax: 4 * ttl,
		Dialect: dialect, Etcd: etcd,
	}
	if s := os.Getenv(seedEnv); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", seedEnv, s, err)
		}
		cfg.Seed = seed
	}
	if s := os.Getenv(soakEnv); s != "" {
		duration, workers, _ := strings.Cut(s, ",")
		d, err := time.ParseDuration(duration)
		if err != nil {
			t.Fatalf("%s=%q: %v", soakEnv, s, err)
		}
		cfg.Duration = d
		if workers != "" {
			if cfg.Workers, err = strconv.Atoi(workers); err != nil || cfg.Workers < 1 {
				t.Fatalf("%s=%q: workers %q", soakEnv, s, workers)
			}
		}
	}
	return cfg
}

// check runs every check on h and reports the run's figures.
func (c *controller) check(h *history.History, ran time.Duration) {
	t := c.t
	if c.cfg.Guarded {
		h.Held = c.guarded.held
	}
	verdict := history.Verify(h, history.Options{DoneTolerance: doneTolerance, Timeout: testctx.Bound(t) / 2})
	verdict.Report(t, fmt.Sprintf("seed %d", c.cfg.Seed))
	t.Logf("ran %v with %d workers (%d processes), TTL %v, %d transactions per tenure, up to %v of work before each",
		ran.Round(time.Millisecond), c.cfg.Workers, len(c.procs), c.cfg.TTL, c.cfg.TxPerTenure, c.cfg.Work)
	t.Logf("operations: %s", opFigures(h))
	var faults []string
	total := 0
	for _, k := range c.kinds() {
		faults = append(faults, fmt.Sprintf("%s %d", k, c.faults[k]))
		total += c.faults[k]
	}
	t.Logf("faults: %d (%s)", total, strings.Join(faults, ", "))
	if len(c.downtime) > 0 {
		t.Logf("the server was down, from its kill to ready after recovery: %s", spread(c.downtime))
	}
	var onTime, beyond []time.Duration
	stoppedLate, starved := 0, 0
	for _, l := range h.Latenesses() {
		if l.Stopped {
			stoppedLate++
			continue
		}
		onTime = append(onTime, l.Late)
		beyond = append(beyond, l.Late-l.Starved)
		if l.Starved > 0 {
			starved++
		}
	}
	t.Logf("Done after Deadline, in processes not stopped meanwhile (negative: before it, on Close or a refusal): %s; less the time the process ran no timer at all (%d of them): %s; %d more in stopped processes",
		spread(onTime), starved, spread(beyond), stoppedLate)
	var starvedFor time.Duration
	for _, spans := range h.Starved {
		for _, s := range spans {
			starvedFor += time.Duration(s.Late)
		}
	}
	t.Logf("the workers' reference timers fired %v late in all (the processes had no CPU; stops included)", starvedFor.Round(time.Millisecond))
	for _, kind := range clusterFaults {
		var grants, writes, renewals []time.Duration
		none := 0
		for _, at := range c.clusterAt[kind] {
			after := h.AfterFault(at)
			for _, f := range []struct {
				got *time.Duration
				to  *[]time.Duration
			}{{after.Grant, &grants}, {after.Write, &writes}, {after.Renewal, &renewals}} {
				if f.got != nil {
					*f.to = append(*f.to, *f.got)
				}
			}
			if after.Grant == nil || after.Write == nil {
				none++
			}
		}
		if len(c.clusterAt[kind]) > 0 {
			t.Logf("%s: from the fault to the next grant %s; to the next accepted write %s (a renewal: %s); %d faults with no grant or no write after them before the end",
				kind, spread(grants), spread(writes), spread(renewals), none)
		}
	}
	all, undisturbed := h.ReleaseToGrant()
	t.Logf("from a release to the next grant to a waiting worker: %s; while no process was stopped: %s", spread(all), spread(undisturbed))
	r := h.Resolutions()
	t.Logf("unknown outcomes of transactions: %d, of which %d not resolved (the worker killed first) and %d still unknown after its last Resolve; Resolve calls answered committed %d, not committed %d, still unknown %d, killed during the call %d; wrong answers %d",
		r.Unknown, r.Unresolved, r.StillUnknown, r.Calls.Committed, r.Calls.NotCommitted, r.Calls.Unknown, r.Calls.Killed, r.Calls.Wrong)
	if c.cfg.Guarded {
		c.logGuarded(h)
	}
	t.Logf("%v", verdict)
}

// opFigures counts the operations by kind and result.
func opFigures(h *history.History) string {
	counts := map[string]map[string]int{}
	for _, op := range h.Ops {
		if counts[op.Call.Op] == nil {
			counts[op.Call.Op] = map[string]int{}
		}
		counts[op.Call.Op][op.Result()]++
	}
	var parts []string
	total := 0
	for _, name := range []string{"wait", "acquire", "renew", "release", "holder", "tenure", "check", "tx", "resolve", "close"} {
		var results []string
		sum := 0
		for _, r := range sortedKeys(counts[name]) {
			results = append(results, fmt.Sprintf("%s %d", r, counts[name][r]))
			sum += counts[name][r]
		}
		total += sum
		if sum > 0 {
			parts = append(parts, fmt.Sprintf("%s %d (%s)", name, sum, strings.Join(results, ", ")))
		}
	}
	return fmt.Sprintf("%d: %s", total, strings.Join(parts, "; "))
}

// spread is p50, p99 and the maximum of ds.
func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
	return fmt.Sprintf("p50 %v, p99 %v, max %v (n=%d)",
		at(0.5).Round(time.Millisecond), at(0.99).Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond), len(s))
}
