package explore

import (
	"context"
	"errors"
	"fmt"

	"leases/evidence/backend"
)

// ExploreTools runs every schedule of the bounded model of operations,
// in each variant, on the real authority of a running backend and the
// real record of operations of a tool (package ops, on an in-memory
// SQLite database of the tool's own).
func ExploreTools(ctx context.Context, deployment backend.Deployment, bounds ToolBounds) (*ToolExploration, Stats, error) {
	var stats Stats
	if err := bounds.Check(); err != nil {
		return nil, stats, err
	}
	ex := &ToolExploration{Bounds: bounds}
	for _, v := range toolVariants {
		figures, each, err := exploreVariant(ctx, deployment, bounds, v, nil)
		if err != nil {
			return nil, stats, fmt.Errorf("explore the tool, %s: %w", v, err)
		}
		stats.Add(each)
		ex.Variants = append(ex.Variants, figures)
	}
	return ex, stats, nil
}

// toolFault, when set, breaks the tool's record on purpose: tests use
// it to show that the counters can fail. It changes the model before
// the exploration.
type toolFault func(*toolModel)

func exploreVariant(ctx context.Context, deployment backend.Deployment, bounds ToolBounds, v ToolVariant, fault toolFault) (ToolFigures, Stats, error) {
	x, done, err := newToolExplorer(ctx, deployment, bounds, v, fault)
	if err != nil {
		return ToolFigures{}, Stats{}, err
	}
	defer done()
	total, err := x.visit(stepContext(ctx, deployment), toolState{}, nil, nothingChanged)
	if err != nil {
		return ToolFigures{}, Stats{}, err
	}
	figures := ToolFigures{
		Variant: v, Schedules: total.schedules, Resent: total.count[toolResent],
		DoubleEffects: total.count[toolDouble], StaleEffects: total.count[toolStale],
	}
	figures.Counterexamples, err = counterexamples(total, toolPropertyNames[:], func(schedule *suffix, prop property) ([]string, error) {
		return replayTool(ctx, deployment, bounds, v, fault, schedule, prop)
	})
	if err != nil {
		return ToolFigures{}, Stats{}, err
	}
	return figures, Stats{States: len(x.memo), StepsRun: x.stepsRun, Restores: x.restores, Chain: x.stepsRun}, nil
}

// toolExplorer walks the tree of schedules depth first, as explorer
// does: a state is the model's part, the authority's rows and the
// tool's, and each distinct state is expanded once.
type toolExplorer struct {
	toolModel
	stop               context.Context // ends the walk, checked between steps
	store              backend.Rewindable
	memo               map[toolKey]*tally
	stepsRun, restores int
	current            toolKey // the databases' rows right now
}

type toolKey struct {
	model            toolState
	authority, tools string
}

func newToolExplorer(ctx context.Context, deployment backend.Deployment, bounds ToolBounds, v ToolVariant, fault toolFault) (*toolExplorer, func(), error) {
	store, err := deployment.Rewindable(ctx)
	if err != nil {
		return nil, nil, err
	}
	tool, err := openToolDB(ctx, v == WithRecord)
	if err != nil {
		return nil, nil, errors.Join(err, store.Close())
	}
	x := &toolExplorer{
		toolModel: toolModel{bounds: bounds, variant: v, authority: store.Authority(), tool: tool},
		stop:      ctx, store: store, memo: map[toolKey]*tally{},
	}
	if fault != nil {
		fault(&x.toolModel)
	}
	return x, func() { _ = errors.Join(tool.close(), store.Close()) }, nil
}

// snapshot names the state of both databases now. known, when not nil,
// is the state before the step that led here, and changed says which
// database the step may have changed: only an acquire changes the
// authority's rows (on a remote backend each snapshot of them is a round
// trip), only a call the tool's (a third of the exploration's time went
// to reading them again after a tick or an acquire).
func (x *toolExplorer) snapshot(ctx context.Context, s toolState, known *toolKey, changed toolChange) (toolKey, error) {
	key := toolKey{model: s}
	if known != nil {
		key.authority, key.tools = known.authority, known.tools
	}
	if known == nil || changed == authorityChanged {
		rows, err := x.store.Snapshot(ctx)
		if err != nil {
			return toolKey{}, err
		}
		key.authority = string(rows)
	}
	if known == nil || changed == toolChanged {
		tools, err := x.tool.snapshot(ctx)
		if err != nil {
			return toolKey{}, err
		}
		key.tools = tools
	}
	return key, nil
}

// toolChange is which database a step may have changed.
type toolChange int8

const (
	nothingChanged toolChange = iota
	authorityChanged
	toolChanged
)

// changes says which database action may change: an acquire the
// authority's, a call the tool's, a tick neither.
func (x *toolExplorer) changes(action int8) toolChange {
	switch {
	case action == toolTick:
		return nothingChanged
	case int(action)%actionsPerWorker == 0:
		return authorityChanged
	}
	return toolChanged
}

// restore rolls both databases back to key's rows, where they differ.
func (x *toolExplorer) restore(ctx context.Context, key toolKey) error {
	if x.current.authority != key.authority {
		if err := x.store.Restore(ctx, []byte(key.authority)); err != nil {
			return err
		}
		x.restores++
	}
	if x.current.tools != key.tools {
		if err := x.tool.restore(ctx, key.tools); err != nil {
			return err
		}
		x.restores++
	}
	x.current = key
	return nil
}

// visit returns the tally of every schedule that continues from s; the
// databases must be in s's state, and known, when not nil, is the state
// before the step that led here, which changed only what changed says.
func (x *toolExplorer) visit(ctx context.Context, s toolState, known *toolKey, changed toolChange) (*tally, error) {
	if err := x.stop.Err(); err != nil {
		return nil, err
	}
	key, err := x.snapshot(ctx, s, known, changed)
	if err != nil {
		return nil, err
	}
	x.current = key
	if t, ok := x.memo[key]; ok {
		return t, nil
	}
	actions := x.enabled(&s, make([]int8, 0, toolTick+1))
	t := &tally{}
	if len(actions) == 0 {
		t = leaf(s.seen[:numToolProperties])
	}
	for _, action := range actions {
		if err := x.restore(ctx, key); err != nil {
			return nil, err
		}
		next, _, err := x.step(ctx, s, action)
		if err != nil {
			return nil, err
		}
		x.stepsRun++
		child, err := x.visit(ctx, next, &key, x.changes(action))
		if err != nil {
			return nil, err
		}
		t.add(action, child)
	}
	x.memo[key] = t
	return t, nil
}

// replayTool runs one schedule from the start on fresh databases,
// describing each step, and confirms that it has the property it was
// chosen for.
func replayTool(ctx context.Context, deployment backend.Deployment, bounds ToolBounds, v ToolVariant, fault toolFault, schedule *suffix, prop property) ([]string, error) {
	x, done, err := newToolExplorer(ctx, deployment, bounds, v, fault)
	if err != nil {
		return nil, err
	}
	defer done()
	s, lines, err := walk(ctx, toolState{}, schedule, x.step)
	if err != nil {
		return nil, err
	}
	if !s.seen[prop] || len(x.enabled(&s, nil)) != 0 {
		return nil, errors.New("a counterexample of the tool did not replay: the explorer is not deterministic")
	}
	return lines, nil
}
