package explore

import "context"

// tally sums up every complete schedule that continues from one state: how
// many there are, how many have each property, and the shortest one that
// has it.
type tally struct {
	schedules int64
	count     [numProperties]int64
	best      [numProperties]*suffix
}

// suffix is a schedule's remaining steps as a shared linked list, so that
// states reached by many prefixes share their continuations.
type suffix struct {
	action int8
	length int
	next   *suffix
}

// endOfSchedule is the empty suffix of a complete schedule.
var endOfSchedule = &suffix{action: -1}

// add folds in the schedules that start with action and continue as child.
func (t *tally) add(action int8, child *tally) {
	t.schedules += child.schedules
	for prop := range numProperties {
		t.count[prop] += child.count[prop]
		if rest := child.best[prop]; rest != nil && (t.best[prop] == nil || shorter(action, rest, t.best[prop])) {
			t.best[prop] = &suffix{action: action, length: rest.length + 1, next: rest}
		}
	}
}

// shorter reports whether action followed by rest comes before other:
// fewer steps first, then the lower action at the first difference.
func shorter(action int8, rest, other *suffix) bool {
	if rest.length+1 != other.length {
		return rest.length+1 < other.length
	}
	if action != other.action {
		return action < other.action
	}
	for a, b := rest, other.next; a != endOfSchedule; a, b = a.next, b.next {
		if a.action != b.action {
			return a.action < b.action
		}
	}
	return false
}

// leaf is the tally of a complete schedule whose properties are seen.
func leaf(seen []bool) *tally {
	t := &tally{schedules: 1}
	for prop, ok := range seen {
		if ok {
			t.count[prop], t.best[prop] = 1, endOfSchedule
		}
	}
	return t
}

// counterexamples replays, for every property named in names that some
// schedule of total has, the shortest such schedule.
func counterexamples(total *tally, names []string, replay func(*suffix, property) ([]string, error)) ([]Counterexample, error) {
	out := []Counterexample{}
	for prop := range property(len(names)) {
		if total.best[prop] == nil {
			continue
		}
		schedule, err := replay(total.best[prop], prop)
		if err != nil {
			return nil, err
		}
		out = append(out, Counterexample{names[prop], schedule})
	}
	return out, nil
}

// walk runs schedule's steps from s, and returns the state it ends in
// and a line describing each step.
func walk[S any](ctx context.Context, s S, schedule *suffix, step func(context.Context, S, int8) (S, string, error)) (S, []string, error) {
	var lines []string
	for at := schedule; at != endOfSchedule; at = at.next {
		var line string
		var err error
		if s, line, err = step(ctx, s, at.action); err != nil {
			return s, nil, err
		}
		lines = append(lines, line)
	}
	return s, lines, nil
}
