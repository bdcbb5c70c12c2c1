package command

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"leases/evidence/backend"
	"leases/evidence/results"
	"leases/evidence/scenario"
	"leases/evidence/worker"
)

// measureFloors measures what starting a worker costs at the least here
// (this binary, started with one handshake), and each floored backend's
// floors (on etcd, on a cluster of their own).
func measureFloors(ctx context.Context, drivers []backend.Driver) (time.Duration, map[string]backend.Floors, error) {
	reexec, err := backend.Average(8, func() error { return worker.Bare(ctx) })
	if err != nil {
		return 0, nil, fmt.Errorf("re-exec floor: %w", err)
	}
	floors := map[string]backend.Floors{}
	for _, d := range drivers {
		if floored, ok := d.(backend.Floored); ok {
			if floors[d.Name()], err = floored.Floors(ctx); err != nil {
				return 0, nil, fmt.Errorf("%s's floors: %w", d.Name(), err)
			}
		}
	}
	return reexec, floors, nil
}

// timingsTable writes the lines of printTimings.
type timingsTable struct{ w io.Writer }

func (t timingsTable) line(what string, count int, each, floor, measured time.Duration) {
	fmt.Fprintf(t.w, "  %-44s %7s %10s %10s %10s %s\n", what, countOrBlank(count), ms(each), ms(floor), ms(measured), ratio(measured, floor))
}

// printTimings writes the run's time, part by part, next to its floors:
// what each part costs at the least here, from the bare costs of its
// mechanisms measured after the run (a worker's start, a transaction, on
// etcd also a cluster's start, a leader's stop and a member's restart,
// each alone). Parts that run side by side count, in the floor of what
// holds them, as the longer of them: a backend's floor is its start, its
// scenarios that run alone, then the longer of its other scenarios and
// its exploration; the run's, the longest backend's, since the backends
// run side by side.
func printTimings(ctx context.Context, w io.Writer, drivers []backend.Driver, doc *results.Results, stats *RunStats, total time.Duration) error {
	reexec, floorsOf, err := measureFloors(ctx, drivers)
	if err != nil {
		return err
	}
	t := timingsTable{w}
	fmt.Fprintln(w, "run-experiment: timings on this machine (never part of the results)")
	fmt.Fprintf(w, "  %-44s %7s %10s %10s %10s %s\n", "part", "count", "floor each", "floor", "measured", "ratio")
	longest, floor := time.Duration(0), time.Duration(0)
	var floored []string
	for i, b := range stats.Backends {
		longest = max(longest, b.Took)
		fmt.Fprintf(w, "  %s\n", b.Backend)
		f, ok := floorsOf[b.Backend]
		if !ok {
			t.line("start", 0, 0, 0, b.Start)
			t.line("scenarios", 0, 0, 0, b.Alone+b.Scenarios)
			t.line("exploration steps", b.Explore.StepsRun, 0, 0, b.Exploration)
			continue
		}
		floored = append(floored, b.Backend)
		floor = max(floor, t.backend(b, f, reexec, doc.Backends[i].Scenarios))
	}
	t.line("worker processes (all backends'; reused)", stats.Processes, reexec, 0, 0)
	t.line("encoding, checking, writing", 0, 0, 0, total-longest)
	t.line(fmt.Sprintf("total (floor: the longest of %s)", strings.Join(floored, ", ")), 0, 0, floor, total)
	return nil
}

// backend writes one floored backend's lines and returns its floor.
func (t timingsTable) backend(b BackendStats, f backend.Floors, reexec time.Duration, scenarios []scenario.Scenario) time.Duration {
	if f.Start > 0 {
		t.line("start (a cluster; floor: one started alone)", 1, f.Start, f.Start, b.Start)
	} else if b.Start > time.Millisecond {
		t.line("start", 0, 0, 0, b.Start)
	}
	alone, beside, all, alones := splitWork(scenarios, f)
	workFloor := func(w scenario.Work) time.Duration {
		return time.Duration(w.Writes)*f.Write + time.Duration(w.Reads)*f.Read +
			time.Duration(w.Elections)*f.Election + time.Duration(w.Restarts)*f.Restart
	}
	// The pool starts its first processes at once, and the first
	// scenario waits for them: one start's floor. Later scenarios are
	// served by processes that earlier ones gave back, or that started
	// while they ran.
	t.line("a worker's process started (the first)", 1, reexec, reexec, 0)
	t.line("transactions that commit", all.Writes, f.Write, time.Duration(all.Writes)*f.Write, 0)
	t.line("transactions that only read", all.Reads, f.Read, time.Duration(all.Reads)*f.Read, 0)
	if all.Elections+all.Restarts > 0 {
		t.line("leaders stopped (an election; floor: alone)", all.Elections, f.Election, time.Duration(all.Elections)*f.Election, 0)
		t.line("members restarted (floor: alone)", all.Restarts, f.Restart, time.Duration(all.Restarts)*f.Restart, 0)
	}
	aloneFloor, besideFloor := workFloor(alone), workFloor(beside)
	if alones > 0 {
		aloneFloor += reexec
		t.line("scenarios that stop a member, alone", 0, 0, aloneFloor, b.Alone)
	} else {
		besideFloor += reexec
	}
	others := "scenarios"
	if b.SideBySide {
		others = "scenarios, beside the exploration"
	}
	t.line(others, 0, 0, besideFloor, b.Scenarios)
	steps := "exploration steps"
	if b.Explore.Chain < b.Explore.StepsRun {
		steps = fmt.Sprintf("exploration steps (%d of them one after another)", b.Explore.Chain)
	}
	exploreFloor := time.Duration(b.Explore.Chain) * f.Step
	t.line(steps, b.Explore.StepsRun, f.Step, exploreFloor, b.Exploration)
	fmt.Fprintf(t.w, "  %-44s %7d (rollbacks to a branch point) and %d distinct states (one snapshot each)\n",
		"  of which restores", b.Explore.Restores, b.Explore.States)
	floor := f.Start + aloneFloor + besideFloor + exploreFloor
	if b.SideBySide {
		floor = f.Start + aloneFloor + max(besideFloor, exploreFloor)
	}
	t.line("the backend, from its start to its end", 0, 0, floor, b.Took)
	return floor
}

// splitWork counts the work of scenarios (their stores' opens included,
// as f has them): of those that ran alone, of the others, and of all,
// and how many scenarios ran alone.
func splitWork(scenarios []scenario.Scenario, f backend.Floors) (alone, others, all scenario.Work, alones int) {
	for _, sc := range scenarios {
		w := sc.Work()
		w.Writes += f.OpenWrites
		w.Reads += w.Workers * f.OpenReads
		all.Add(w)
		if stopsMembers(sc.Name) {
			alone.Add(w)
			alones++
		} else {
			others.Add(w)
		}
	}
	return alone, others, all, alones
}

// stopsMembers reports whether the scenario called name runs alone.
func stopsMembers(name string) bool {
	i := slices.IndexFunc(scenario.Defs(), func(d scenario.Def) bool { return d.Name == name })
	return i >= 0 && scenario.Defs()[i].StopsMembers
}

func countOrBlank(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprint(n)
}

func ms(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return fmt.Sprintf("%.3f ms", float64(d.Microseconds())/1000)
}

func ratio(measured, floor time.Duration) string {
	if measured == 0 || floor == 0 {
		return ""
	}
	return fmt.Sprintf("%.2fx", float64(measured)/float64(floor))
}
