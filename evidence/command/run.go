package command

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"leases/evidence/backend"
	"leases/evidence/explore"
	"leases/evidence/results"
	"leases/evidence/scenario"
	"leases/evidence/worker"
)

// DefaultTimeout bounds a whole run. It only catches a hung run (a worker
// that never answers); it orders nothing, and must never fire on a slow but
// working run. A healthy run takes 2 to 3 s here, but 28 s on the same two
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
	// Scenario is passed to every scenario's run. The backends run side by
	// side, so its callbacks may be called from several goroutines at once.
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
	// Processes counts the worker processes the run started.
	Processes int
}

// BackendStats is what the run did on one backend and how long it took.
type BackendStats struct {
	Backend string
	Start   time.Duration // readying the backend (starting a cluster)
	// Alone is the wall time of the scenarios that run alone (they stop
	// a member); then Scenarios, of the others, and Exploration, side by
	// side where SideBySide.
	Alone, Scenarios, Exploration time.Duration
	SideBySide                    bool
	Explore                       explore.Stats
	Took                          time.Duration // the whole backend, from its start to its end
}

// Run runs every scenario, each on a fresh sandbox that is removed
// afterwards, then explores every schedule of the bounded model, on each
// backend in turn, and returns the semantic result.
func Run(ctx context.Context, drivers []backend.Driver, opts Options) (*results.Results, error) {
	// Every scenario pauses a worker: where none can be paused, fail
	// before any backend starts.
	if err := worker.CanStop(); err != nil {
		return nil, err
	}
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
	// The backends run side by side: SQLite's exploration keeps a core
	// busy while etcd's scenarios and exploration mostly wait for Raft
	// round trips. What each found goes in the document in drivers' order,
	// whichever finished first.
	stats.Backends = make([]BackendStats, len(drivers))
	// One pool for every backend: a process in standby is any backend's
	// worker, and the backends' scenarios rarely need theirs at once.
	if opts.Scenario.Workers == nil {
		pool := worker.NewPool(ctx, 2*len(drivers))
		defer func() {
			pool.Close()
			stats.Processes = pool.Started()
		}()
		opts.Scenario.Workers = pool
	}
	sections := make([]results.Backend, len(drivers))
	errs := make([]error, len(drivers))
	var wg sync.WaitGroup
	for i, driver := range drivers {
		stats.Backends[i].Backend = driver.Name()
		wg.Go(func() { sections[i], errs[i] = runBackend(ctx, driver, opts, &stats.Backends[i]) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err // the first backend's failure, in drivers' order
		}
	}
	doc := &results.Results{Schema: results.Schema, Backends: sections}
	doc.Agreement = results.Agree(doc.Backends)
	return doc, nil
}

// runBackend readies one backend in a temporary directory of its own, runs
// its scenarios and its exploration, and ends what it started.
func runBackend(ctx context.Context, driver backend.Driver, opts Options, stats *BackendStats) (results.Backend, error) {
	start := time.Now()
	defer func() { stats.Took = time.Since(start) }()
	deployment, end, err := backend.StartInTemp(ctx, driver)
	stats.Start = time.Since(start)
	if err != nil {
		return results.Backend{}, err
	}
	bounds := opts.Bounds
	if bounds == (explore.Bounds{}) {
		bounds = BoundsFor(driver.Name())
	}
	ctx, stop := endOnFailure(ctx, deployment)
	section, err := runOn(ctx, driver, deployment, bounds, opts, stats)
	stop()
	endErr := end()
	// Asked only once end has returned: a member that died may fail a
	// step (its connection ends) a moment before its end is known, and
	// end waits for every process it started.
	if f, ok := deployment.(backend.Failing); ok && f.Err() != nil {
		err = fmt.Errorf("%s: %w", driver.Name(), f.Err()) // what the run's steps said is only a consequence
	}
	return section, errors.Join(err, endErr)
}

// endOnFailure returns a copy of ctx that ends when deployment fails by
// itself (backend.Failing), and stop, which releases it.
func endOnFailure(ctx context.Context, deployment backend.Deployment) (context.Context, func()) {
	f, ok := deployment.(backend.Failing)
	if !ok {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		select {
		case <-f.Failed():
			cancel(f.Err())
		case <-done:
		}
	}()
	return ctx, func() {
		close(done)
		cancel(nil)
	}
}

// BoundsFor is the exploration's default bounds on a backend: the model's
// defaults, except on etcd, where every step is a round trip through a
// three-member cluster whose members share this machine's cores. There
// the default bounds take about 30 s; with the smaller bounds the whole
// command takes 2 to 3 s (docs/performance.md). A test of tests/etcdstore
// explores the default bounds on etcd and finds SQLite's figures.
func BoundsFor(backend string) explore.Bounds {
	if backend == "etcd" {
		return SmallBounds
	}
	return explore.DefaultBounds
}

// SmallBounds are the command's bounds on etcd: 18 schedules a protocol
// (fence before acting: 126), with every property the default bounds show
// (lost updates, I3 and I5 unfenced, gaps, none guarded).
var SmallBounds = explore.Bounds{Workers: 2, TTL: 1, LastTick: 1}

// ToolBoundsFor is the bounds of the explored model of operations on a
// backend, and whether the command explores it there: on SQLite,
// explore.DefaultToolBounds (two operations a tenure, each sent up to
// twice). Not on etcd: the record lives in the tool's own SQLite file
// whatever the backend, and etcd's part in the model, the grants, is
// what its own exploration already covers, at a round trip or two a
// state: the model took over a second of the command's 2 s there, one
// step after another.
func ToolBoundsFor(backend string) (explore.ToolBounds, bool) {
	if backend == "etcd" {
		return explore.ToolBounds{}, false
	}
	return explore.DefaultToolBounds, true
}

// runOn runs the scenarios and the exploration on one backend. First the
// scenarios that stop a member of the deployment (Def.StopsMembers: the
// failover of etcd's leader), one at a time and alone: anything else on
// the cluster then would meet the election, as unknown outcomes. Then the
// other scenarios, one after another, and the exploration: side by side
// on a remote deployment (backend.Remote: on etcd each part is a chain
// of round trips that leaves the cores idle between its steps, and each
// works under a prefix of its own), else one after the other (on SQLite
// both are CPU in this process and its workers: side by side they only
// competed, 0.90x to 0.96x the wall one after the other, in three of
// four sets of paired runs).
func runOn(ctx context.Context, driver backend.Driver, deployment backend.Deployment, bounds explore.Bounds, opts Options, stats *BackendStats) (results.Backend, error) {
	var alone, beside []scenario.Def
	for _, def := range scenario.Defs() {
		switch {
		case !def.RunsOn(driver.Name()):
		case def.StopsMembers:
			alone = append(alone, def)
		default:
			beside = append(beside, def)
		}
	}
	ran := map[string]scenario.Scenario{}
	// The scenarios' workers come from the run's pool (Run): started
	// ahead, and each process serves scenario after scenario.
	scenarioOpts := opts.Scenario
	run := func(ctx context.Context, defs []scenario.Def) error {
		for _, def := range defs {
			sc, err := scenario.Run(ctx, driver, deployment, def, scenarioOpts)
			if err != nil {
				return fmt.Errorf("%s: %w", driver.Name(), err)
			}
			ran[def.Name] = sc
		}
		return nil
	}
	start := time.Now()
	if err := run(ctx, alone); err != nil {
		return results.Backend{Backend: driver.Name()}, err
	}
	stats.Alone = time.Since(start)
	var exploration *explore.Exploration
	both := oneThenOther
	if _, remote := deployment.(backend.Remote); remote {
		both, stats.SideBySide = sideBySide, true
	}
	err := both(ctx, func(ctx context.Context) error {
		start := time.Now()
		err := run(ctx, beside)
		stats.Scenarios = time.Since(start)
		return err
	}, func(ctx context.Context) (err error) {
		exploration, err = exploreOn(ctx, driver.Name(), deployment, bounds, stats)
		return err
	})
	section := results.Backend{Backend: driver.Name(), Exploration: exploration}
	for _, def := range scenario.Defs() { // in the document's order
		if sc, ok := ran[def.Name]; ok {
			section.Scenarios = append(section.Scenarios, sc)
		}
	}
	return section, err
}

// exploreOn explores every schedule within bounds on deployment and,
// where the command explores it (ToolBoundsFor), the model of operations
// beside it: each is a chain of steps on databases of its own. On SQLite
// both are CPU in this process, and the second chain takes the core that
// the etcd part leaves idle between its round trips, and all of both
// once it has ended (0.87x the command's wall, 1.03x its CPU, medians of
// ten pairs under farm-bench against one after the other).
func exploreOn(ctx context.Context, backendName string, deployment backend.Deployment, bounds explore.Bounds, stats *BackendStats) (*explore.Exploration, error) {
	start := time.Now()
	defer func() { stats.Exploration = time.Since(start) }()
	var exploration *explore.Exploration
	var tool *explore.ToolExploration
	var tools explore.Stats
	parts := []func(context.Context) error{func(ctx context.Context) (err error) {
		exploration, stats.Explore, err = explore.Explore(ctx, deployment, bounds)
		return err
	}}
	if toolBounds, ok := ToolBoundsFor(backendName); ok {
		parts = append(parts, func(ctx context.Context) (err error) {
			tool, tools, err = explore.ExploreTools(ctx, deployment, toolBounds)
			return err
		})
	}
	if err := sideBySide(ctx, parts...); err != nil {
		return nil, fmt.Errorf("%s: %w", backendName, err)
	}
	exploration.Tool = tool
	stats.Explore.Beside(tools)
	return exploration, nil
}

// oneThenOther runs parts one after the other, until one fails.
func oneThenOther(ctx context.Context, parts ...func(context.Context) error) error {
	for _, part := range parts {
		if err := part(ctx); err != nil {
			return err
		}
	}
	return nil
}

// sideBySide runs each of parts in a goroutine of its own and returns
// once all have. The first to fail ends the others' context; its error,
// not what the others then say, is the one returned.
func sideBySide(ctx context.Context, parts ...func(context.Context) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for _, part := range parts {
		wg.Go(func() {
			if err := part(ctx); err != nil {
				once.Do(func() { first = err })
				cancel(err)
			}
		})
	}
	wg.Wait()
	return first
}
