package experiment

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"leases"
	"leases/sqlite"
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
	// WorkerStarted, when set, learns the pid of every worker process as
	// it starts. Pids never enter the results.
	WorkerStarted func(scenario, worker string, pid int)
	// DatabaseCreated, when set, runs after the controller has created a
	// scenario's database and before any worker starts. Tests use it to
	// interfere (hold a lock) and prove that a hung run fails loudly.
	DatabaseCreated func(scenario, dbPath string)
	// Bounds are the explored model's; the zero value means DefaultBounds.
	Bounds Bounds
	// Stats, when set, is filled with what the run did and how long each
	// part took; none of it enters the results.
	Stats *RunStats
}

// RunStats is what a run did and how long it took.
type RunStats struct {
	Workers     int           // worker processes started
	Scenarios   time.Duration // wall time of the scenarios
	Exploration time.Duration // wall time of the exploration
	Explore     ExploreStats
}

// Run runs every scenario, each on a fresh database in a temporary
// directory that is removed afterwards, then explores every schedule of the
// bounded model, and returns the semantic result.
func Run(ctx context.Context, opts Options) (*Results, error) {
	ctx, cancel := withTimeout(ctx, opts)
	defer cancel()
	stats := opts.Stats
	if stats == nil {
		stats = &RunStats{}
	}
	started := opts.WorkerStarted
	opts.WorkerStarted = func(scenario, worker string, pid int) {
		stats.Workers++
		if started != nil {
			started(scenario, worker, pid)
		}
	}
	results := &Results{Schema: Schema}
	start := time.Now()
	for _, def := range scenarios {
		sc, err := runScenario(ctx, def, opts)
		if err != nil {
			return nil, err
		}
		results.Scenarios = append(results.Scenarios, sc)
	}
	stats.Scenarios = time.Since(start)
	bounds := opts.Bounds
	if bounds == (Bounds{}) {
		bounds = DefaultBounds
	}
	// Not at the same time as the scenarios: measured, that saved nothing
	// on two cores, since starting worker processes needs the CPU too.
	start = time.Now()
	exploration, exploreStats, err := Explore(ctx, bounds)
	if err != nil {
		return nil, err
	}
	stats.Exploration, stats.Explore = time.Since(start), exploreStats
	results.Exploration = exploration
	return results, nil
}

// RunScenario runs the one scenario called name.
func RunScenario(ctx context.Context, name string, opts Options) (Scenario, error) {
	for _, def := range scenarios {
		if def.name == name {
			ctx, cancel := withTimeout(ctx, opts)
			defer cancel()
			return runScenario(ctx, def, opts)
		}
	}
	return Scenario{}, fmt.Errorf("no scenario called %q", name)
}

func withTimeout(ctx context.Context, opts Options) (context.Context, context.CancelFunc) {
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return context.WithTimeoutCause(ctx, timeout, fmt.Errorf("run timed out after %v, a bound for hung runs", timeout))
}

func runScenario(ctx context.Context, def scenarioDef, opts Options) (sc Scenario, err error) {
	dir, err := os.MkdirTemp("", "leases-"+def.name+"-")
	if err != nil {
		return Scenario{}, fmt.Errorf("scenario %s: %w", def.name, err)
	}
	defer func() {
		// A second try, since what stopped the first may have passed (too
		// many open files while the killed workers' pipes were still
		// being closed, say); a directory left behind is named.
		rmErr := os.RemoveAll(dir)
		if rmErr != nil {
			rmErr = os.RemoveAll(dir)
		}
		if rmErr != nil {
			err = errors.Join(err, fmt.Errorf("scenario %s: cannot remove its temporary directory %s: %w", def.name, dir, rmErr))
		}
	}()

	dbPath := filepath.Join(dir, "shared.db")
	// The controller creates the database and keeps its own connection
	// only to read the receiver's record after each step.
	store, err := sqlite.Open(ctx, dbPath)
	if err != nil {
		return Scenario{}, fmt.Errorf("scenario %s: %w", def.name, err)
	}
	defer func() {
		if closeErr := store.Close(); closeErr != nil {
			err = errors.Join(err, fmt.Errorf("scenario %s: closing its database: %w", def.name, closeErr))
		}
	}()

	if opts.DatabaseCreated != nil {
		opts.DatabaseCreated(def.name, dbPath)
	}
	r := &scenarioRun{
		ctx: ctx, def: def, dbPath: dbPath, observer: store.Receiver(def.mode),
		leaseOf: map[string]leases.Lease{}, opts: opts,
	}
	def.schedule(r)
	r.killRemaining()
	if r.err != nil {
		return Scenario{}, fmt.Errorf("scenario %s, %w", def.name, r.err)
	}
	final, found, err := r.observer.Read(ctx, def.params.Resource)
	if err != nil {
		return Scenario{}, fmt.Errorf("scenario %s: final state: %w", def.name, err)
	}
	sc = Scenario{
		Name: def.name, Description: def.description, Receiver: def.mode,
		Parameters: def.params, Steps: r.steps, Final: recordOrNil(final, found),
	}
	sc.Verdicts = computeVerdicts(sc.Steps, sc.Final)
	return sc, nil
}

func recordOrNil(rec leases.Record, found bool) *leases.Record {
	if !found {
		return nil
	}
	return &rec
}
