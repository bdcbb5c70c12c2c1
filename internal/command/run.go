package command

import (
	"context"
	"fmt"
	"os"
	"time"

	"leases/internal/backend"
	"leases/internal/explore"
	"leases/internal/results"
	"leases/internal/scenario"
)

// DefaultTimeout bounds a whole run. It only catches a hung run (a worker
// that never answers); it orders nothing, and must never fire on a slow but
// working run. A healthy run takes about 2 s here, but 28 s on the same two
// cores with the load average at 10, which a one-minute bound left only a
// factor of two from failing; ten minutes, go test's own default bound,
// leaves thirty.
const DefaultTimeout = 10 * time.Minute

// Options tune a run; the zero value runs with the defaults.
type Options struct {
	// Timeout bounds the run; when it fires the run fails, naming the
	// scenario and step, and every worker is killed. Zero means
	// DefaultTimeout.
	Timeout time.Duration
	// Scenario is passed to every scenario's run.
	Scenario scenario.Options
	// Bounds are the explored model's on every backend; the zero value
	// means each backend's default (see BoundsFor).
	Bounds explore.Bounds
	// Stats, when set, is filled with what the run did and how long each
	// part took; none of it enters the results.
	Stats *RunStats
}

// RunStats is what a run did and how long it took, backend by backend.
type RunStats struct {
	Backends []BackendStats
}

// BackendStats is what the run did on one backend and how long it took.
type BackendStats struct {
	Backend     string
	Start       time.Duration // readying the backend (starting a cluster)
	Workers     int           // worker processes started
	Scenarios   time.Duration // wall time of the scenarios
	Exploration time.Duration // wall time of the exploration
	Explore     explore.Stats
}

// Run runs every scenario, each on a fresh place that is removed
// afterwards, then explores every schedule of the bounded model, on each
// backend in turn, and returns the semantic result.
func Run(ctx context.Context, kinds []backend.Kind, opts Options) (*results.Results, error) {
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("run timed out after %v, a bound for hung runs", timeout))
	defer cancel()
	stats := opts.Stats
	if stats == nil {
		stats = &RunStats{}
	}
	started := opts.Scenario.WorkerStarted
	opts.Scenario.WorkerStarted = func(sc, worker string, pid int) {
		stats.Backends[len(stats.Backends)-1].Workers++
		if started != nil {
			started(sc, worker, pid)
		}
	}
	doc := &results.Results{Schema: results.Schema}
	for _, kind := range kinds {
		dir, err := os.MkdirTemp("", "leases-"+kind.Name()+"-")
		if err != nil {
			return nil, err
		}
		stats.Backends = append(stats.Backends, BackendStats{Backend: kind.Name()})
		start := time.Now()
		running, err := kind.Start(ctx, dir)
		stats.Backends[len(stats.Backends)-1].Start = time.Since(start)
		if err != nil {
			return nil, fmt.Errorf("start %s: %w", kind.Name(), err)
		}
		bounds := opts.Bounds
		if bounds == (explore.Bounds{}) {
			bounds = BoundsFor(kind.Name())
		}
		err = runOn(ctx, kind, running, bounds, opts, &stats.Backends[len(stats.Backends)-1], doc)
		if closeErr := running.Close(); err == nil {
			err = closeErr
		}
		if rmErr := os.RemoveAll(dir); err == nil {
			err = rmErr
		}
		if err != nil {
			return nil, err
		}
	}
	doc.Agreement = results.Agree(doc.Backends)
	return doc, nil
}

// BoundsFor is the exploration's default bounds on a backend: the model's
// defaults, except on etcd, where every step is a round trip through a
// three-member cluster. There the default bounds' 10,755 steps take about
// 40 s; the smaller bounds keep the command near 2 s. A test of the etcd
// module explores the default bounds on etcd and finds SQLite's figures.
func BoundsFor(backend string) explore.Bounds {
	if backend == "etcd" {
		return SmallBounds
	}
	return explore.DefaultBounds
}

// SmallBounds are the command's bounds on etcd: 56 schedules a protocol
// (fence before acting: 882), with every property the default bounds show.
var SmallBounds = explore.Bounds{Workers: 2, TTL: 1, LastTick: 2}

// runOn runs the scenarios and the exploration on one backend.
func runOn(ctx context.Context, kind backend.Kind, running backend.Running, bounds explore.Bounds, opts Options, stats *BackendStats, doc *results.Results) error {
	section := results.Backend{Backend: kind.Name()}
	start := time.Now()
	for _, def := range scenario.Defs() {
		if !def.RunsOn(kind.Name()) {
			continue
		}
		sc, err := scenario.Run(ctx, kind, running, def, opts.Scenario)
		if err != nil {
			return fmt.Errorf("%s: %w", kind.Name(), err)
		}
		section.Scenarios = append(section.Scenarios, sc)
	}
	stats.Scenarios += time.Since(start)
	// Not at the same time as the scenarios: measured, that saved nothing
	// on two cores, since starting worker processes needs the CPU too.
	start = time.Now()
	exploration, exploreStats, err := explore.Explore(ctx, running, bounds)
	if err != nil {
		return fmt.Errorf("%s: %w", kind.Name(), err)
	}
	stats.Exploration += time.Since(start)
	stats.Explore.Add(exploreStats)
	section.Exploration = exploration
	doc.Backends = append(doc.Backends, section)
	return nil
}
