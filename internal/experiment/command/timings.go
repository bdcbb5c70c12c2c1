package command

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"leases/internal/experiment/backend"
	"leases/internal/experiment/results"
	"leases/internal/experiment/worker"
)

// measureFloors measures what starting a worker costs at the least here
// (this binary, started with one handshake), and each floored backend's
// floors.
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

// printTimings writes the run's time, part by part: on a backend whose
// driver measures floors (SQLite's) next to them, on any other as
// measured (its floors are its own benchmarks').
func printTimings(ctx context.Context, w io.Writer, drivers []backend.Driver, doc *results.Results, stats *RunStats, total time.Duration) error {
	reexec, floorsOf, err := measureFloors(ctx, drivers)
	if err != nil {
		return err
	}
	line := func(what string, count int, each, floor, measured time.Duration) {
		fmt.Fprintf(w, "  %-34s %7s %10s %10s %10s %s\n", what, countOrBlank(count), ms(each), ms(floor), ms(measured), ratio(measured, floor))
	}
	fmt.Fprintln(w, "run-experiment: timings on this machine (never part of the results)")
	fmt.Fprintf(w, "  %-34s %7s %10s %10s %10s %s\n", "part", "count", "floor each", "floor", "measured", "ratio")
	// The backends run side by side: what is left of the total is what
	// the longest of them did not take.
	longest, floors := time.Duration(0), time.Duration(0)
	var floored []string
	for i, b := range stats.Backends {
		longest = max(longest, b.Took)
		fmt.Fprintf(w, "  %s\n", b.Backend)
		if b.Start > time.Millisecond {
			line("start (a cluster)", 0, 0, 0, b.Start)
		}
		f, ok := floorsOf[b.Backend]
		if !ok {
			line("worker processes started", b.Workers, 0, 0, 0)
			line("scenarios", 0, 0, 0, b.Scenarios)
			line("exploration steps", b.Explore.StepsRun, 0, 0, b.Exploration)
			continue
		}
		floored = append(floored, b.Backend)
		var writes, reads int
		for _, sc := range doc.Backends[i].Scenarios {
			wr, rd := sc.Transactions()
			writes, reads = writes+wr, reads+rd
		}
		scenarioFloor := time.Duration(b.Workers)*reexec + time.Duration(writes)*f.Write + time.Duration(reads)*f.Read
		exploreFloor := time.Duration(b.Explore.StepsRun) * f.Step
		floors += scenarioFloor + exploreFloor
		line("worker processes started", b.Workers, reexec, time.Duration(b.Workers)*reexec, 0)
		line("transactions that commit", writes, f.Write, time.Duration(writes)*f.Write, 0)
		line("transactions that only read", reads, f.Read, time.Duration(reads)*f.Read, 0)
		line("scenarios", 0, 0, scenarioFloor, b.Scenarios)
		line("exploration steps", b.Explore.StepsRun, f.Step, exploreFloor, b.Exploration)
		fmt.Fprintf(w, "  %-34s %7d (rollbacks to a branch point) and %d distinct states (one snapshot each)\n",
			"  of which restores", b.Explore.Restores, b.Explore.States)
	}
	line("encoding, checking, writing", 0, 0, 0, total-longest)
	line(fmt.Sprintf("total (floors: %s's parts)", strings.Join(floored, ", ")), 0, 0, floors, total)
	return nil
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
