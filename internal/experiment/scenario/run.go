package scenario

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"leases"
	"leases/internal/experiment/backend"
)

// Options tune a scenario's run; the zero value is the default.
type Options struct {
	// WorkerStarted, when set, learns the pid of every worker process as
	// it starts. Pids never enter the results.
	WorkerStarted func(scenario, worker string, pid int)
	// PlaceMade, when set, runs after the controller has made the
	// scenario's place and opened its own store there, and before any
	// worker starts. Tests use it to interfere (hold a lock) and prove
	// that a hung run fails loudly.
	PlaceMade func(scenario, spec string)
}

// Run runs the scenario def on a fresh place of the running backend, and
// removes the place afterwards. Every worker is a process of its own that
// opens its own store on the place with kind.
func Run(ctx context.Context, kind backend.Kind, running backend.Running, def Def, opts Options) (sc Scenario, err error) {
	place, err := running.NewPlace(ctx, def.Name)
	if err != nil {
		return Scenario{}, fmt.Errorf("scenario %s: %w", def.Name, err)
	}
	defer func() {
		if closeErr := place.Close(); closeErr != nil {
			err = errors.Join(err, fmt.Errorf("scenario %s: %w", def.Name, closeErr))
		}
	}()
	// The controller opens the place first (on SQLite, it creates the
	// database) and keeps its own store only to read the receiver's
	// record after each step.
	store, err := kind.Open(ctx, place.Spec())
	if err != nil {
		return Scenario{}, fmt.Errorf("scenario %s: %w", def.Name, err)
	}
	defer func() {
		if closeErr := store.Close(); closeErr != nil {
			err = errors.Join(err, fmt.Errorf("scenario %s: closing its store: %w", def.Name, closeErr))
		}
	}()
	if opts.PlaceMade != nil {
		opts.PlaceMade(def.Name, place.Spec())
	}
	r := &script{
		ctx: ctx, def: def, kind: kind.Name(), place: place, observer: backend.Reader(store, def.Receiver),
		leaseOf: map[string]leases.Lease{}, opts: opts,
	}
	def.Schedule(r)
	r.killRemaining()
	if r.err != nil {
		return Scenario{}, fmt.Errorf("scenario %s, %w", def.Name, r.err)
	}
	final, found, err := r.observer(ctx, def.Params.Resource)
	if err != nil {
		return Scenario{}, fmt.Errorf("scenario %s: final state: %w", def.Name, err)
	}
	sc = Scenario{
		Name: def.Name, Description: def.Description, Receiver: def.Receiver,
		Parameters: def.Params, Steps: r.steps, Final: recordOrNil(final, found),
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

// RunByName runs the scenario called name on kind, started for this run
// alone in a temporary directory that is removed afterwards.
func RunByName(ctx context.Context, kind backend.Kind, name string, opts Options) (sc Scenario, err error) {
	i := slices.IndexFunc(defs, func(d Def) bool { return d.Name == name })
	if i < 0 {
		return Scenario{}, fmt.Errorf("no scenario called %q", name)
	}
	running, end, err := backend.StartInTemp(ctx, kind)
	if err != nil {
		return Scenario{}, err
	}
	defer func() { err = errors.Join(err, end()) }()
	return Run(ctx, kind, running, defs[i], opts)
}
