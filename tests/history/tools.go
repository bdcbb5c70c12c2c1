package history

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"leases"
)

// ToolKey names one operation on a tool server: the server ("http" or
// "mcp"), the lease's resource and epoch, and the operation's key.
type ToolKey struct {
	Server, Resource string
	Epoch            int64
	Key              string
}

func (k ToolKey) String() string {
	return fmt.Sprintf("%s %s epoch %d key %s", k.Server, k.Resource, k.Epoch, k.Key)
}

// ToolRecord is an operation's record in its tool server's database
// after the run: "pending" or "done", the tool it was of, and, when done,
// the stored answer's body as an agent is shown it.
type ToolRecord struct {
	State, Tool, Body string
}

// ToolEffect is one effect of an operation: a row of the tool writing
// rows, in commit order, or a line of the tool appending to a file, in
// the file's order (Seq is the position in either).
type ToolEffect struct {
	ToolKey
	Tool string
	Seq  int64
}

// ToolAdmission is one record's insert into a tool server's record of
// operations, numbered in the commit order of its database: the first
// admission of every epoch is one, since a call of an epoch the server
// never saw finds no record to replay.
type ToolAdmission struct {
	ToolKey
	Seq int64
}

// ToolState is what the tool servers hold after a run of the tool path.
type ToolState struct {
	Records    map[ToolKey]ToolRecord
	Effects    []ToolEffect
	Admissions []ToolAdmission
	// External names the tools whose effect is outside the database (a
	// pending record may stand for an effect done or not).
	External map[string]bool
}

// ToolChecks are the checks of a run of the tool path: agents calling
// tool servers through httpfence and mcpfence under leases' sessions.
func ToolChecks() []Check {
	return []Check{
		{"every epoch granted once", epochsGrantedOnce},
		{"no call refused as invalid input", noInvalidInput},
		{"each operation's effect at most once, and never without its record", effectsAtMostOnce},
		{"no effect of an epoch below one already admitted (commit order of the tool's database)", noEffectBelowAdmitted},
		{"every accepted or replayed answer is the record's (the same body as the first answer)", answersFromRecord},
		{"every stale refusal names a newer admitted epoch; no conflict", refusalsTrue},
		{"every call whose answer was lost resolved by the record", lostAnswersResolved},
	}
}

// VerifyTools runs ToolChecks, and porcupine over the history of grants,
// renewals, releases and tool calls.
func VerifyTools(h *History, opts Options) Verdict { return verify(h, ToolChecks(), opts) }

// toolCall is the operation a "tool" call is of.
func toolCall(o *Op) ToolKey {
	return ToolKey{Server: o.Call.Value, Resource: o.Call.Resource, Epoch: o.Call.Epoch, Key: o.Call.OpID}
}

// answered says whether the call came back with the record's answer:
// the operation done now, or before.
func (o *Op) answered() bool {
	return o.Result() == ResultOK && (o.Ret.Outcome == leases.Accepted || o.Ret.Outcome == leases.Replay)
}

func sortedKeys[V any](m map[ToolKey]V) []ToolKey {
	return slices.SortedFunc(maps.Keys(m), func(a, b ToolKey) int {
		return cmp.Or(cmp.Compare(a.Server, b.Server), cmp.Compare(a.Resource, b.Resource),
			cmp.Compare(a.Epoch, b.Epoch), cmp.Compare(a.Key, b.Key))
	})
}

func effectsAtMostOnce(h *History) []string {
	if h.Tools == nil {
		return []string{"no tool state read"}
	}
	var bad []string
	effects := map[ToolKey]int{}
	for _, e := range h.Tools.Effects {
		effects[e.ToolKey]++
	}
	for _, k := range sortedKeys(effects) {
		rec, found := h.Tools.Records[k]
		switch {
		case effects[k] > 1:
			bad = append(bad, fmt.Sprintf("DOUBLE EFFECT: %v done %d times", k, effects[k]))
		case !found:
			bad = append(bad, fmt.Sprintf("%v has an effect and no record", k))
		case rec.State == "pending" && !h.Tools.External[rec.Tool]:
			bad = append(bad, fmt.Sprintf("%v of %s is pending, and its effect is in the database", k, rec.Tool))
		}
	}
	for _, k := range sortedKeys(h.Tools.Records) {
		if rec := h.Tools.Records[k]; rec.State == "done" && effects[k] != 1 {
			bad = append(bad, fmt.Sprintf("%v is recorded done with %d effects", k, effects[k]))
		}
	}
	return bad
}

func noEffectBelowAdmitted(h *History) []string {
	if h.Tools == nil {
		return nil
	}
	var bad []string
	type place struct{ server, resource string }
	highest := map[place]ToolAdmission{}
	for _, a := range slices.SortedFunc(slices.Values(h.Tools.Admissions), func(a, b ToolAdmission) int {
		return cmp.Or(cmp.Compare(a.Server, b.Server), cmp.Compare(a.Seq, b.Seq))
	}) {
		p := place{a.Server, a.Resource}
		if top, ok := highest[p]; ok && a.Epoch < top.Epoch {
			bad = append(bad, fmt.Sprintf("STALE ADMISSION: %v admitted (#%d) after epoch %d (#%d)", a.ToolKey, a.Seq, top.Epoch, top.Seq))
			continue
		}
		highest[p] = a
	}
	rows := map[place]ToolEffect{}
	for _, e := range h.Tools.Effects {
		p := place{e.Server, e.Resource}
		if h.Tools.External[e.Tool] {
			continue // done after its admission: the admissions' order is the one checked
		}
		if top, ok := rows[p]; ok && e.Epoch < top.Epoch {
			bad = append(bad, fmt.Sprintf("STALE EFFECT: %v committed (#%d) after an effect of epoch %d (#%d)", e.ToolKey, e.Seq, top.Epoch, top.Seq))
			continue
		}
		rows[p] = e
	}
	return bad
}

func answersFromRecord(h *History) []string {
	if h.Tools == nil {
		return nil
	}
	var bad []string
	for _, o := range h.callsOf("tool") {
		if !o.answered() {
			continue
		}
		k := toolCall(o)
		rec, found := h.Tools.Records[k]
		switch {
		case !found || rec.State != "done":
			bad = append(bad, fmt.Sprintf("%v answered %s, and its record is %q", o, o.Ret.Outcome, rec.State))
		case rec.Body != o.Ret.Body:
			bad = append(bad, fmt.Sprintf("%v answered %s with %q, and its record holds %q", o, o.Ret.Outcome, o.Ret.Body, rec.Body))
		}
	}
	return bad
}

func refusalsTrue(h *History) []string {
	if h.Tools == nil {
		return nil
	}
	admitted := map[[2]string]int64{}
	for _, a := range h.Tools.Admissions {
		p := [2]string{a.Server, a.Resource}
		admitted[p] = max(admitted[p], a.Epoch)
	}
	var bad []string
	for _, o := range h.callsOf("tool") {
		switch {
		case o.Result() != ResultOK:
		case o.Ret.Outcome == leases.Conflict:
			bad = append(bad, fmt.Sprintf("%v answered conflict: its key was never used for another request", o))
		case o.Ret.Outcome == leases.Stale && (o.Ret.Newest <= o.Call.Epoch || o.Ret.Newest > admitted[[2]string{o.Call.Value, o.Call.Resource}]):
			bad = append(bad, fmt.Sprintf("%v refused stale with newest epoch %d, admitted at most %d", o, o.Ret.Newest,
				admitted[[2]string{o.Call.Value, o.Call.Resource}]))
		}
	}
	return bad
}

// lost is whether the call's answer did not reach the agent: lost on
// the way (unknown), its agent killed, or answered "in progress".
func (o *Op) lost() bool {
	r := o.Result()
	return r == ResultUnknown || r == ResultKilled || r == ResultOK && o.Ret.Outcome == leases.InProgress
}

func lostAnswersResolved(h *History) []string {
	if h.Tools == nil {
		return nil
	}
	var bad []string
	for _, k := range sortedKeys(h.lostOperations()) {
		if _, found := h.Tools.Records[k]; found {
			continue // the record tells: done with its answer, or pending (checked above)
		}
		for _, e := range h.Tools.Effects {
			if e.ToolKey == k {
				bad = append(bad, fmt.Sprintf("%v: its answer was lost, it has no record, and its effect is there (#%d)", k, e.Seq))
			}
		}
	}
	return bad
}

// lostOperations are the operations whose every call lost its answer:
// by operation, its calls.
func (h *History) lostOperations() map[ToolKey][]*Op {
	calls := map[ToolKey][]*Op{}
	for _, o := range h.callsOf("tool") {
		calls[toolCall(o)] = append(calls[toolCall(o)], o)
	}
	for k, ops := range calls {
		if !slices.ContainsFunc(ops, (*Op).lost) || slices.ContainsFunc(ops, (*Op).answered) ||
			slices.ContainsFunc(ops, func(o *Op) bool { return o.Result() == ResultOK && o.Ret.Outcome == leases.Stale }) {
			delete(calls, k)
		}
	}
	return calls
}

// ToolFigures counts what a run of the tool path did.
type ToolFigures struct {
	Calls, Operations, Accepted, Replays, Stale, InProgress, Lost, Effects int
	// Resolved: operations whose every call lost its answer, by what the
	// record said after the run.
	Resolved struct{ Done, Pending, None int }
}

// Figures counts h's tool calls and their outcomes.
func (h *History) ToolFigures() ToolFigures {
	var f ToolFigures
	keys := map[ToolKey]bool{}
	for _, o := range h.callsOf("tool") {
		f.Calls++
		keys[toolCall(o)] = true
		switch {
		case o.lost() && o.Result() != ResultOK:
			f.Lost++
		case o.Result() != ResultOK:
		case o.Ret.Outcome == leases.Accepted:
			f.Accepted++
		case o.Ret.Outcome == leases.Replay:
			f.Replays++
		case o.Ret.Outcome == leases.Stale:
			f.Stale++
		case o.Ret.Outcome == leases.InProgress:
			f.InProgress++
		}
	}
	f.Operations = len(keys)
	if h.Tools == nil {
		return f
	}
	f.Effects = len(h.Tools.Effects)
	for k := range h.lostOperations() {
		switch h.Tools.Records[k].State {
		case "done":
			f.Resolved.Done++
		case "pending":
			f.Resolved.Pending++
		default:
			f.Resolved.None++
		}
	}
	return f
}

func (f ToolFigures) String() string {
	return fmt.Sprintf("%d calls of %d operations: %d accepted, %d replays, %d stale refusals, %d in progress, %d answers lost; "+
		"%d effects; operations with every answer lost, resolved by the record: %d done, %d pending (effect unknown, at most once), %d not done",
		f.Calls, f.Operations, f.Accepted, f.Replays, f.Stale, f.InProgress, f.Lost, f.Effects, f.Resolved.Done, f.Resolved.Pending, f.Resolved.None)
}
