package explore

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"leases"
	"leases/evidence/backend"
)

// Exploration is the results.json section that covers every schedule of
// the bounded model, recomputed on every run.
type Exploration struct {
	Bounds    Bounds            `json:"bounds"`
	Protocols []ProtocolFigures `json:"protocols"`
	// Tool covers every schedule of the bounded model of operations
	// within a tenure, with resends (ExploreTools; Explore leaves it
	// nil, the command fills it).
	Tool *ToolExploration `json:"tool_operations"`
}

// ProtocolFigures counts, for one protocol, the schedules explored and the
// schedules that have each property.
type ProtocolFigures struct {
	Protocol  Protocol `json:"protocol"`
	Schedules int64    `json:"schedules"`
	// Violations counts schedules that break each invariant I1-I5.
	Violations Violations `json:"invariant_violations"`
	// LostUpdates counts schedules in which a stale write overwrote a
	// newer value.
	LostUpdates int64 `json:"lost_update_schedules"`
	// Gaps counts schedules in which a stale write was accepted before the
	// receiver had committed the newer epoch (C7's gap).
	Gaps int64 `json:"gap_schedules"`
	// StaleAfterRead counts schedules in which a stale write was accepted
	// after the new holder had read the receiver; only fence-before-acting
	// has that read.
	StaleAfterRead *int64 `json:"stale_after_new_holders_read_schedules,omitempty"`
	// Counterexamples holds, for every non-zero count, the shortest
	// schedule that has it (ties: A's step first, then B's, C's, the clock's).
	Counterexamples []Counterexample `json:"counterexamples"`
}

// Violations counts schedules per broken invariant.
type Violations struct {
	I1 int64 `json:"I1_at_most_one_live_lease"`
	I2 int64 `json:"I2_granted_epochs_increase"`
	I3 int64 `json:"I3_fence_never_decreases"`
	I4 int64 `json:"I4_one_value_per_epoch"`
	I5 int64 `json:"I5_no_write_below_committed_epoch"`
}

// Counterexample is one whole schedule, step by step, that has Property.
type Counterexample struct {
	Property string   `json:"property"`
	Schedule []string `json:"schedule"`
}

// Stats describes the work an exploration did; it varies with the
// SQLite build, so it never enters results.json.
type Stats struct {
	// States is how many distinct states were expanded; StepsRun is how
	// many steps ran on the real authority and receiver; Restores is how
	// many times the database was rolled back to a branch point.
	States, StepsRun, Restores int
	// Chain is how many of the steps ran one after another: all of them
	// where the parts ran one after another (Add), the longest part's
	// where side by side (Beside).
	Chain int
}

// Add adds other's figures to s, as if other's steps ran after s's.
func (s *Stats) Add(other Stats) {
	s.States += other.States
	s.StepsRun += other.StepsRun
	s.Restores += other.Restores
	s.Chain += other.Chain
}

// Beside adds other's figures to s, as if other's steps ran beside s's:
// the longer of the two chains is the chain.
func (s *Stats) Beside(other Stats) {
	chain := max(s.Chain, other.Chain)
	s.Add(other)
	s.Chain = chain
}

// Explore runs every schedule of the bounded model for each protocol on the
// real authority and receiver of a running backend, each protocol on a
// store of its own: side by side on a remote deployment (backend.Remote:
// on etcd, each is a chain of round trips to the leader, which serves
// several at once), else one after another.
func Explore(ctx context.Context, deployment backend.Deployment, bounds Bounds) (*Exploration, Stats, error) {
	var stats Stats
	if err := bounds.Check(); err != nil {
		return nil, stats, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	figures := make([]ProtocolFigures, len(protocols))
	each := make([]Stats, len(protocols))
	errs := make([]error, len(protocols))
	atOnce := 1
	if _, remote := deployment.(backend.Remote); remote {
		atOnce = len(protocols)
	}
	turns := make(chan struct{}, atOnce)
	var wg sync.WaitGroup
	for i, p := range protocols {
		turns <- struct{}{}
		wg.Go(func() {
			defer func() { <-turns }()
			figures[i], each[i], errs[i] = exploreProtocol(ctx, deployment, bounds, p, faults{})
			if errs[i] != nil && !errors.Is(errs[i], errNoUserTransactions) {
				errs[i] = fmt.Errorf("explore %s: %w", p, errs[i])
				cancel(errs[i]) // the others stop: the first failure is the error
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && ctx.Err() != nil {
		return nil, stats, err
	}
	ex := &Exploration{Bounds: bounds}
	for i := range protocols {
		if errors.Is(errs[i], errNoUserTransactions) {
			continue // a protocol this backend cannot run
		}
		if atOnce > 1 {
			stats.Beside(each[i])
		} else {
			stats.Add(each[i])
		}
		ex.Protocols = append(ex.Protocols, figures[i])
	}
	return ex, stats, nil
}

// faults breaks the real authority or receiver on purpose: tests use it to
// show that each of the explorer's checks can fail. The zero value breaks
// nothing. A broken part must still answer as a function of the database's
// rows and its arguments alone, or the memo would be wrong.
type faults struct {
	// authority, when set, wraps the real authority.
	authority func(acquirer) acquirer
	// receiver, when set, makes the receiver from the store in place of
	// the protocol's real one.
	receiver func(backend.Store) leases.Receiver
	// guarded, when set, makes the guarded receiver from the store in
	// place of the real one.
	guarded func(backend.Store) leases.GuardedReceiver
}

// exploreProtocol explores one protocol with the given faults (none in the
// command).
func exploreProtocol(ctx context.Context, deployment backend.Deployment, bounds Bounds, p Protocol, f faults) (ProtocolFigures, Stats, error) {
	x, done, err := newExplorer(ctx, deployment, bounds, p, f)
	if err != nil {
		return ProtocolFigures{}, Stats{}, err
	}
	defer done()
	total, err := x.visit(stepContext(ctx, deployment), modelState{})
	if err != nil {
		return ProtocolFigures{}, Stats{}, err
	}
	figures := ProtocolFigures{
		Protocol: p, Schedules: total.schedules,
		Violations: Violations{
			I1: total.count[propOneLiveLease], I2: total.count[propEpochsIncrease],
			I3: total.count[propFenceMonotone], I4: total.count[propOneValue], I5: total.count[propBelowCommitted],
		},
		LostUpdates: total.count[propLostUpdate], Gaps: total.count[propGap],
	}
	if p == FenceBeforeActingProtocol {
		figures.StaleAfterRead = &total.count[propAfterRead]
	}
	figures.Counterexamples, err = counterexamples(total, propertyNames[:], func(schedule *suffix, prop property) ([]string, error) {
		return replay(ctx, deployment, bounds, p, f, schedule, prop)
	})
	if err != nil {
		return ProtocolFigures{}, Stats{}, err
	}
	return figures, Stats{States: len(x.memo), StepsRun: x.stepsRun, Restores: x.restores, Chain: x.stepsRun}, nil
}

// explorer walks the tree of schedules depth first on one in-memory
// database. Restoring a state's rows before each of its branches is a
// rollback to the shared prefix. Two prefixes that reach the same state
// (same model state, same rows) have the same futures, because every step
// depends only on the two; so each distinct state is expanded once and its
// tally reused, while every schedule is still counted.
type explorer struct {
	model
	stop     context.Context // ends the walk, checked between steps
	store    backend.Rewindable
	memo     map[stateKey]*tally
	stepsRun int
	restores int
	current  string // the database's rows right now
}

// stateKey is a state exactly: the model's part and every row of the
// database (a canonical snapshot), so two keys are equal only when the two
// states are.
type stateKey struct {
	model modelState
	rows  string
}

func newExplorer(ctx context.Context, deployment backend.Deployment, bounds Bounds, p Protocol, f faults) (*explorer, func(), error) {
	store, err := deployment.Rewindable(ctx)
	if err != nil {
		return nil, nil, err
	}
	mode := leases.Fenced
	if p == Unfenced {
		mode = leases.Unfenced
	}
	var auth acquirer = store.Authority()
	if f.authority != nil {
		auth = f.authority(auth)
	}
	var receiver leases.Receiver = store.Receiver(mode)
	guarded := store.Guarded()
	switch p {
	case TxFenceProtocol:
		userDB, err := openTxFence(ctx)
		if err != nil {
			return nil, nil, errors.Join(err, store.Close())
		}
		store, receiver = withFence{store, userDB}, userDB
	case TxGuardedProtocol:
		users, ok := store.(backend.UserTransactions)
		if !ok {
			return nil, nil, errors.Join(errNoUserTransactions, store.Close())
		}
		txGuard, err := openTxGuarded(ctx, users)
		if err != nil {
			return nil, nil, errors.Join(err, store.Close())
		}
		store, guarded = withFence{store, txGuard.fence}, txGuard
	}
	if f.receiver != nil {
		receiver = f.receiver(store)
	}
	if f.guarded != nil {
		guarded = f.guarded(store)
	}
	x := &explorer{
		model: model{bounds: bounds, protocol: p, authority: auth, receiver: receiver, guarded: guarded},
		stop:  ctx, store: store, memo: map[stateKey]*tally{},
	}
	return x, func() { _ = store.Close() }, nil
}

// visit returns the tally of every schedule that continues from s; the
// database must be in s's state.
func (x *explorer) visit(ctx context.Context, s modelState) (*tally, error) {
	if err := x.stop.Err(); err != nil {
		return nil, err
	}
	rows, err := x.store.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	key := stateKey{model: s, rows: string(rows)}
	x.current = key.rows
	if t, ok := x.memo[key]; ok {
		return t, nil
	}
	actions := x.enabled(&s, make([]int8, 0, maxWorkers+1))
	t := &tally{}
	if len(actions) == 0 {
		t = leaf(s.seen[:])
	}
	for _, action := range actions {
		// Roll back to this state unless the database is still in it
		// (the last branch changed nothing: a tick, a refusal, a read).
		if x.current != key.rows {
			if err := x.store.Restore(ctx, rows); err != nil {
				return nil, err
			}
			x.current = key.rows
			x.restores++
		}
		next, _, err := x.step(ctx, s, action)
		if err != nil {
			return nil, err
		}
		x.stepsRun++
		child, err := x.visit(ctx, next)
		if err != nil {
			return nil, err
		}
		t.add(action, child)
	}
	x.memo[key] = t
	return t, nil
}

// stepContext is the context an explorer's steps run on. On a deployment
// in this process (SQLite's, in memory) it cannot end: modernc.org/sqlite
// starts a goroutine to interrupt each statement whose context can end,
// which was a sixth of this process's CPU in the command, and a statement
// on an in-memory database of this process alone waits for nothing. The
// walk still stops between steps once ctx has ended (the explorer's
// stop). On a remote deployment a round trip can hang: its steps keep
// ctx.
func stepContext(ctx context.Context, deployment backend.Deployment) context.Context {
	if _, remote := deployment.(backend.Remote); remote {
		return ctx
	}
	return context.WithoutCancel(ctx)
}

// replay runs one schedule from the start on a fresh database, describing
// each step, and confirms that it has the property it was chosen for.
func replay(ctx context.Context, deployment backend.Deployment, bounds Bounds, p Protocol, f faults, schedule *suffix, prop property) ([]string, error) {
	x, done, err := newExplorer(ctx, deployment, bounds, p, f)
	if err != nil {
		return nil, err
	}
	defer done()
	s, lines, err := walk(ctx, modelState{}, schedule, x.step)
	if err != nil {
		return nil, err
	}
	if !s.seen[prop] || len(x.enabled(&s, nil)) != 0 {
		return nil, errors.New("a counterexample did not replay: the explorer is not deterministic")
	}
	return lines, nil
}
