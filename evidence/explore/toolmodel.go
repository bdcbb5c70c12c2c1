package explore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"leases"
	"leases/ops"
)

// ToolBounds are the limits of the explored model of operations: workers
// that each try once to acquire, then perform Operations operations under
// their epoch at a tool, in order, each with a key of its own; any call
// may have its answer lost, and a worker may resend any call it has not
// seen answered, up to Sends times each.
type ToolBounds struct {
	Workers    int   `json:"workers"`
	TTL        int64 `json:"ttl"`
	LastTick   int64 `json:"last_tick"`
	Operations int   `json:"operations_per_tenure"`
	Sends      int   `json:"sends_per_operation"`
}

// DefaultToolBounds are the bounds results.json reports, on every
// backend: the second worker's grant can come while the first still has
// calls to send or resend.
var DefaultToolBounds = ToolBounds{Workers: 2, TTL: 1, LastTick: 1, Operations: 2, Sends: 2}

// maxOperations bounds ToolBounds.Operations, and maxSends Sends, so that
// a state is a fixed-size, comparable value.
const (
	maxOperations = 3
	maxSends      = 3
)

// Check refuses bounds the explorer cannot run.
func (b ToolBounds) Check() error {
	if err := (Bounds{Workers: b.Workers, TTL: b.TTL, LastTick: b.LastTick}).Check(); err != nil {
		return err
	}
	if b.Operations < 1 || b.Operations > maxOperations || b.Sends < 1 || b.Sends > maxSends {
		return fmt.Errorf("%w: %d operations and %d sends, want 1 to %d and 1 to %d",
			leases.ErrInvalidInput, b.Operations, b.Sends, maxOperations, maxSends)
	}
	return nil
}

// ToolVariant is how the tool answers a call in the explored model.
type ToolVariant string

// The explored variants.
const (
	// WithRecord: the tool's effect runs in ops.Table.Do, the record of
	// operations, which admits the epoch and answers a resend from the
	// stored answer.
	WithRecord ToolVariant = "record"
	// Unprotected: no record; every call that arrives does the effect.
	Unprotected ToolVariant = "unprotected"
)

var toolVariants = []ToolVariant{WithRecord, Unprotected}

// ToolExploration is the results.json section that covers every schedule
// of the bounded model of operations.
type ToolExploration struct {
	Bounds   ToolBounds    `json:"bounds"`
	Variants []ToolFigures `json:"variants"`
}

// ToolFigures counts, for one variant, the schedules explored and the
// schedules that have each property.
type ToolFigures struct {
	Variant   ToolVariant `json:"variant"`
	Schedules int64       `json:"schedules"`
	// Resent counts schedules in which a call was sent again after its
	// answer was lost.
	Resent int64 `json:"schedules_with_a_resend"`
	// DoubleEffects counts schedules in which one operation (epoch and
	// key) was done twice, as the tool's effects' rows show.
	DoubleEffects int64 `json:"double_effect_schedules"`
	// StaleEffects counts schedules in which an effect was done for a
	// call whose epoch was below one the tool had admitted before.
	StaleEffects int64 `json:"stale_effect_schedules"`
	// Counterexamples holds, for every non-zero count, the shortest
	// schedule that has it.
	Counterexamples []Counterexample `json:"counterexamples"`
}

// Properties of the model of operations, counted as the others are.
const (
	toolResent property = iota
	toolDouble
	toolStale
	numToolProperties
)

var toolPropertyNames = [numToolProperties]string{"resend", "double_effect", "stale_effect"}

// toolState is everything about a point in a schedule that the databases
// do not hold.
type toolState struct {
	clock  int64
	phases [maxWorkers]phase // idle, holding or finished
	epochs [maxWorkers]int64
	// sends counts each operation's calls sent; answered says which the
	// worker has seen answered.
	sends    [maxWorkers][maxOperations]int8
	answered [maxWorkers][maxOperations]bool
	// admitted is the highest epoch of a call the tool did not refuse.
	admitted int64
	seen     [numProperties]bool
}

// Actions: worker i's acquire is i*actionsPerWorker; its send of
// operation k is i*actionsPerWorker + 1 + 2k, and + 2 + 2k when the answer
// is lost. The clock's sorts after every worker's.
const (
	actionsPerWorker = 1 + 2*maxOperations
	toolTick         = maxWorkers * actionsPerWorker
)

func opKey(k int) string { return fmt.Sprintf("op-%d", k+1) }

// toolModel runs the steps of the model of operations on the backend's
// real authority and the tool's real record.
type toolModel struct {
	bounds    ToolBounds
	variant   ToolVariant
	authority acquirer
	tool      *toolDB
}

// enabled lists the steps that can come next, in the fixed order that
// breaks ties between counterexamples: A's, B's, then the clock.
func (m *toolModel) enabled(s *toolState, into []int8) []int8 {
	into = into[:0]
	for i := range m.bounds.Workers {
		base := int8(i * actionsPerWorker)
		switch s.phases[i] {
		case idle:
			into = append(into, base)
		case holding:
			for k := range m.bounds.Operations {
				if m.maySend(s, i, k) {
					into = append(into, base+1+int8(2*k), base+2+int8(2*k))
				}
			}
		}
	}
	if s.clock < m.bounds.LastTick {
		into = append(into, toolTick)
	}
	return into
}

// maySend reports whether worker i may send operation k now: not seen
// answered, sends left, and the operations before it sent already.
func (m *toolModel) maySend(s *toolState, i, k int) bool {
	return !s.answered[i][k] && int(s.sends[i][k]) < m.bounds.Sends && (k == 0 || s.sends[i][k-1] > 0)
}

// step runs action and returns the next state and a line describing it.
func (m *toolModel) step(ctx context.Context, s toolState, action int8) (toolState, string, error) {
	if action == toolTick {
		s.clock++
		return s, fmt.Sprintf("clock: tick %d", s.clock), nil
	}
	i, rest := int(action)/actionsPerWorker, int(action)%actionsPerWorker
	if rest == 0 {
		return m.acquire(ctx, s, i)
	}
	return m.send(ctx, s, i, (rest-1)/2, (rest-1)%2 == 1)
}

func (m *toolModel) acquire(ctx context.Context, s toolState, i int) (toolState, string, error) {
	lease, refused, line, err := grant(ctx, m.authority, i, s.clock, m.bounds.TTL)
	s.phases[i], s.epochs[i] = holding, lease.Epoch
	if refused {
		s.phases[i] = finished
	}
	return s, line, err
}

// send is one call of worker i's operation k, with the epoch it was
// granted, whether or not its lease is still live; lost says that its
// answer never reaches the worker.
func (m *toolModel) send(ctx context.Context, s toolState, i, k int, lost bool) (toolState, string, error) {
	epoch, key := s.epochs[i], opKey(k)
	before, err := m.tool.effects(ctx, epoch, key)
	if err != nil {
		return s, "", err
	}
	outcome, err := m.call(ctx, epoch, key)
	if err != nil {
		return s, "", err
	}
	after, err := m.tool.effects(ctx, epoch, key)
	if err != nil {
		return s, "", err
	}
	s.seen[toolResent] = s.seen[toolResent] || s.sends[i][k] > 0
	s.seen[toolDouble] = s.seen[toolDouble] || after > 1
	s.seen[toolStale] = s.seen[toolStale] || (after > before && epoch < s.admitted)
	if outcome != leases.Stale {
		s.admitted = max(s.admitted, epoch)
	}
	s.sends[i][k]++
	answer := string(outcome)
	switch {
	case lost:
		answer += ", answer lost"
	case outcome == leases.Stale:
		s.phases[i] = finished // superseded: it sends nothing more
	default:
		s.answered[i][k] = true
	}
	// An operation sent for the last time is done with, answered or not:
	// one state, whatever the answer, so that the memo expands it once.
	if int(s.sends[i][k]) == m.bounds.Sends {
		s.answered[i][k] = true
	}
	return s, fmt.Sprintf("%s sends %s with epoch %d: %s", workerName(i), key, epoch, answer), nil
}

// call is the tool's side of one call: the record's answer and, when it
// is new, the effect in the record's transaction; without a record, the
// effect alone.
func (m *toolModel) call(ctx context.Context, epoch int64, key string) (leases.Outcome, error) {
	do := func(ctx context.Context, tx *sql.Tx) (ops.Response, error) {
		return ops.Response{Status: 201}, m.tool.effect(ctx, tx, epoch, key)
	}
	if m.tool.record == nil {
		tx, err := m.tool.db.BeginTx(ctx, nil)
		if err != nil {
			return "", err
		}
		if _, err := do(ctx, tx); err != nil {
			return "", errors.Join(err, tx.Rollback())
		}
		return leases.Accepted, tx.Commit()
	}
	call := ops.Call{Resource: modelResource, Epoch: epoch, Key: key, Request: []byte("POST /effects " + key)}
	result, err := m.tool.record.Do(ctx, call, do)
	return result.Outcome, err
}
