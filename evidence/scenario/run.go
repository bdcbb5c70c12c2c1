package scenario

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"leases"
	"leases/evidence/backend"
	"leases/evidence/worker"
)

// Options tune a scenario's run; the zero value is the default.
type Options struct {
	// WorkerStarted, when set, learns the pid of every worker process as
	// it starts. A scenario starts its workers at once, and calls it one
	// at a time, in no set order. Pids never enter the results.
	WorkerStarted func(scenario, worker string, pid int)
	// SandboxMade, when set, runs after the controller has made the
	// scenario's sandbox and opened its own store there, and before any
	// worker starts. Tests use it to interfere (hold a lock) and prove
	// that a hung run fails loudly.
	SandboxMade func(scenario, address string)
	// Workers, when set, are the processes the scenario's workers come
	// from, started ahead of need; else each is started when the
	// scenario needs it.
	Workers *worker.Pool
}

// Run runs the scenario def on a fresh sandbox of the running backend, and
// removes the sandbox afterwards. Every worker is a process of its own that
// opens its own store on the sandbox with driver.
func Run(ctx context.Context, driver backend.Driver, deployment backend.Deployment, def Def, opts Options) (sc Scenario, err error) {
	sandbox, err := deployment.NewSandbox(ctx, def.Name)
	if err != nil {
		return Scenario{}, fmt.Errorf("scenario %s: %w", def.Name, err)
	}
	defer func() {
		if closeErr := sandbox.Close(); closeErr != nil {
			err = errors.Join(err, fmt.Errorf("scenario %s: %w", def.Name, closeErr))
		}
	}()
	// The controller opens the sandbox first (on SQLite, it creates the
	// database) and keeps its own store only to read the receiver's
	// record after each step.
	store, err := observer(ctx, driver, sandbox)
	if err != nil {
		return Scenario{}, fmt.Errorf("scenario %s: %w", def.Name, err)
	}
	defer func() {
		if closeErr := store.Close(); closeErr != nil {
			err = errors.Join(err, fmt.Errorf("scenario %s: closing its store: %w", def.Name, closeErr))
		}
	}()
	if opts.SandboxMade != nil {
		opts.SandboxMade(def.Name, sandbox.Address())
	}
	r := &script{
		ctx: ctx, def: def, backendName: driver.Name(), sandbox: sandbox, observer: backend.Reader(store, def.Receiver),
		leaseOf: map[string]leases.Lease{}, opts: opts,
	}
	def.Schedule(r)
	effects, err := r.endTool()
	r.killRemaining()
	if r.err != nil {
		return Scenario{}, fmt.Errorf("scenario %s, %w", def.Name, r.err)
	}
	if err != nil {
		return Scenario{}, fmt.Errorf("scenario %s: the tool server: %w", def.Name, err)
	}
	final, found, err := r.observer(ctx, def.Params.Resource)
	if err != nil {
		return Scenario{}, fmt.Errorf("scenario %s: final state: %w", def.Name, err)
	}
	sc = Scenario{
		Name: def.Name, Description: def.Description, Receiver: def.Receiver,
		Parameters: def.Params, Steps: r.steps, Final: recordOrNil(final, found), FinalToolEffects: effects,
	}
	sc.Verdicts = computeVerdicts(sc.Steps, sc.Final, sc.FinalToolEffects)
	return sc, nil
}

// observer is the controller's own store in sandbox: the one the sandbox
// gives (backend.Observed), else one the driver opens.
func observer(ctx context.Context, driver backend.Driver, sandbox backend.Sandbox) (backend.Store, error) {
	if o, ok := sandbox.(backend.Observed); ok {
		return o.Observer(), nil
	}
	return driver.Open(ctx, sandbox.Address())
}

func recordOrNil(rec leases.Record, found bool) *leases.Record {
	if !found {
		return nil
	}
	return &rec
}

// RunByName runs the scenario called name on driver, started for this run
// alone in a temporary directory that is removed afterwards.
func RunByName(ctx context.Context, driver backend.Driver, name string, opts Options) (sc Scenario, err error) {
	i := slices.IndexFunc(defs, func(d Def) bool { return d.Name == name })
	if i < 0 {
		return Scenario{}, fmt.Errorf("no scenario called %q", name)
	}
	deployment, end, err := backend.StartInTemp(ctx, driver)
	if err != nil {
		return Scenario{}, err
	}
	defer func() { err = errors.Join(err, end()) }()
	return Run(ctx, driver, deployment, defs[i], opts)
}
