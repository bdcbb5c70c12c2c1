package history

import (
	"fmt"

	"github.com/anishathalye/porcupine"

	"leases"
)

// The sequential model of one resource: the authority's lease row, and
// the fence: the fence table's row with the business counter (the
// service path), or the fenced receiver's record (the evidence's
// receiver, in the stress tests). It is written from the contract
// (docs/contract.md, docs/service.md, the Outcome docs of package
// leases), not from the code under test, so that the two can disagree.
type modelState struct {
	// The authority: the last epoch granted, the current tenure, and the
	// last tick that changed the row.
	Epoch     int64
	Holder    string
	Held      bool
	GrantedAt int64
	ExpiresAt int64
	LastTick  int64
	// Vague says that a call whose tick the server chose and whose
	// answer is unknown (a grant, a renewal) may have changed the
	// current lease: its ticks are not known until an answer shows them
	// (see stepServer). Never set on the path where the caller gives
	// the tick.
	Vague bool
	// The fence: the highest epoch a committed observe or admitted
	// transaction brought (the receiver's record's Epoch); Seq, the
	// number of committed business rows; ValueEpoch and Value, the value
	// the receiver stores and the epoch it came with.
	Fence      int64
	Seq        int64
	ValueEpoch int64
	Value      string
	// Tools are the newest epochs the tool servers admitted ("http",
	// "mcp": toolServer's index).
	Tools [2]int64
}

// Input is an operation of the history as the model takes it.
type Input struct {
	// Op: acquire, renew, release, holder (the authority's calls);
	// tenure, count, tx (the service path's fence); write, fence, read
	// (the fenced receiver's); final (what the databases hold at the end).
	Op       string
	Resource string
	Holder   string
	Epoch    int64  // renew, release: the held lease's; tenure, tx: the tenure's; write, fence: the writer's
	Now, TTL int64  // the authority's ticks
	Seq      int64  // tx: the sequence number its row committed with
	Value    string // write: the value offered
	// ServerTime: the server's clock chose the tick, and Now is unknown
	// (stepServer); on a tx, it was admitted by the server-clock guard.
	ServerTime bool
}

// Output is what the operation answered: one of the results, and for an
// authority's call the lease it answered with (none on a refusal whose
// answer does not carry the live lease: Epoch 0), and a backwards
// refusal's last tick (0 where the answer does not carry it).
type Output struct {
	Result    string
	Holder    string
	Epoch     int64
	GrantedAt int64
	ExpiresAt int64
	Last      int64
	// Seq is the counter a count found; for the final look, with Fence.
	Seq, Fence int64
	// A receiver's answer: a write's or fence's outcome, whether a read
	// found a record, and the record (Fence, ValueEpoch, Value).
	Outcome    leases.Outcome
	Found      bool
	ValueEpoch int64
	Value      string
	// The final look: LastTick is the lease row's, compared (with
	// Holder, GrantedAt and ExpiresAt) where Row says the test read the
	// row; the receiver's value is compared where Stored says so.
	LastTick    int64
	Row, Stored bool
}

// step is the model's transition for in: the state after it and what
// the operation answers. An operation that changes nothing returns s.
func (s modelState) step(in Input) (modelState, Output) {
	switch in.Op {
	case "acquire":
		if in.Now < s.LastTick {
			return s, Output{Result: ResultBackwards, Last: s.LastTick}
		}
		if s.Held && in.Now < s.ExpiresAt {
			return s, s.lease(ResultHeld)
		}
		s.Epoch++
		s.Holder, s.Held, s.GrantedAt, s.ExpiresAt, s.LastTick = in.Holder, true, in.Now, in.Now+in.TTL, in.Now
		return s, s.lease(ResultOK)
	case "renew", "release":
		switch {
		case s.Epoch == 0:
			return s, Output{Result: ResultNotHolder}
		case in.Now < s.LastTick:
			return s, Output{Result: ResultBackwards, Last: s.LastTick}
		case s.Epoch != in.Epoch || !s.Held || s.Holder != in.Holder:
			return s, Output{Result: ResultNotHolder}
		case in.Now >= s.ExpiresAt:
			return s, Output{Result: ResultExpired}
		}
		s.LastTick = in.Now
		if in.Op == "release" {
			s.Holder, s.Held, s.ExpiresAt = "", false, in.Now
			return s, Output{Result: ResultOK}
		}
		s.ExpiresAt = max(s.ExpiresAt, in.Now+in.TTL) // never earlier
		return s, s.lease(ResultOK)
	case "holder":
		if s.Held && in.Now < s.ExpiresAt {
			return s, s.lease(ResultOK)
		}
		return s, Output{Result: ResultNone}
	case "tenure":
		if in.Epoch < s.Fence {
			return s, Output{Result: ResultSuperseded}
		}
		if in.Epoch > s.Epoch {
			return s, Output{Result: "never-granted"}
		}
		s.Fence = in.Epoch
		return s, Output{Result: ResultOK}
	case "count":
		return s, Output{Result: ResultOK, Seq: s.Seq}
	case "final":
		// What the databases hold once every worker has exited.
		return s, Output{Result: ResultOK, Epoch: s.Epoch, Fence: s.Fence, Seq: s.Seq, Holder: s.Holder,
			GrantedAt: s.GrantedAt, ExpiresAt: s.ExpiresAt, LastTick: s.LastTick, ValueEpoch: s.ValueEpoch, Value: s.Value}
	case "write", "fence", "read":
		return s.receive(in)
	case "tool":
		return s.tool(in)
	case "tx":
		if in.Epoch < s.Fence {
			return s, Output{Result: ResultSuperseded}
		}
		if in.Epoch > s.Epoch {
			return s, Output{Result: "never-granted"}
		}
		if in.Seq != s.Seq+1 {
			// A committed row must be the next in the counter's order;
			// any other number cannot come from this state.
			return s, Output{Result: "out-of-order"}
		}
		s.Fence, s.Seq = in.Epoch, in.Seq
		return s, Output{Result: ResultOK}
	}
	panic("history model: unknown operation " + in.Op)
}

// receive is the fenced receiver's transition: a write of a value with
// the writer's epoch, a fence (observe) of an epoch, a read. An epoch no
// grant has reached cannot come from a holder.
func (s modelState) receive(in Input) (modelState, Output) {
	if in.Op == "read" {
		return s, s.stored(ResultOK, "")
	}
	if in.Epoch > s.Epoch {
		return s, Output{Result: "never-granted"}
	}
	switch {
	case in.Epoch < s.Fence:
		return s, s.stored(ResultOK, leases.Stale)
	case in.Op == "fence" && in.Epoch == s.Fence:
		return s, s.stored(ResultOK, leases.Replay)
	case in.Op == "fence":
		s.Fence = in.Epoch
	case in.Epoch == s.ValueEpoch && in.Value == s.Value:
		return s, s.stored(ResultOK, leases.Replay)
	case in.Epoch == s.ValueEpoch:
		return s, s.stored(ResultOK, leases.Conflict)
	default: // above the fence, or at it before the epoch's first value
		s.Fence, s.ValueEpoch, s.Value = in.Epoch, in.Epoch, in.Value
	}
	return s, s.stored(ResultOK, leases.Accepted)
}

// stored is an answer that shows the receiver's record.
// tool is a call of a tool server: refused stale below the newest epoch
// it admitted (which the refusal names), admitted otherwise, whatever
// the record then answered (done now, a replay, in progress).
func (s modelState) tool(in Input) (modelState, Output) {
	i := toolServer(in.Value)
	switch {
	case in.Epoch > s.Epoch:
		return s, Output{Result: "never-granted"}
	case in.Epoch < s.Tools[i]:
		return s, Output{Result: ResultOK, Outcome: leases.Stale, Fence: s.Tools[i]}
	}
	s.Tools[i] = in.Epoch
	return s, Output{Result: ResultOK, Outcome: leases.Accepted}
}

// toolServer is the index in modelState.Tools of the server a tool call
// went to.
func toolServer(name string) int {
	if name == "mcp" {
		return 1
	}
	return 0
}

func (s modelState) stored(result string, outcome leases.Outcome) Output {
	return Output{Result: result, Outcome: outcome, Found: s.Fence > 0, Fence: s.Fence, ValueEpoch: s.ValueEpoch, Value: s.Value}
}

func (s modelState) lease(result string) Output {
	return Output{Result: result, Holder: s.Holder, Epoch: s.Epoch, GrantedAt: s.GrantedAt, ExpiresAt: s.ExpiresAt}
}

// matches reports whether the model's answer want is the answer got: the
// result, and every field the real answer carries.
func matches(in Input, want, got Output) bool {
	if want.Result != got.Result {
		return false
	}
	record := want.Fence == got.Fence && want.ValueEpoch == got.ValueEpoch && want.Value == got.Value
	switch {
	case got.Result == ResultBackwards:
		return got.Last == 0 || want.Last == got.Last
	case in.Op == "count":
		return want.Seq == got.Seq
	case in.Op == "final":
		return want.Epoch == got.Epoch && want.Fence == got.Fence && want.Seq == got.Seq &&
			(!got.Row || want.Holder == got.Holder && want.GrantedAt == got.GrantedAt && want.ExpiresAt == got.ExpiresAt && want.LastTick == got.LastTick) &&
			(!got.Stored || want.ValueEpoch == got.ValueEpoch && want.Value == got.Value)
	case in.Op == "write", in.Op == "fence":
		return want.Outcome == got.Outcome && record
	case in.Op == "read":
		return want.Found == got.Found && (!got.Found || record)
	case in.Op == "tool":
		stale := got.Outcome == leases.Stale
		return (want.Outcome == leases.Stale) == stale && (!stale || got.Fence == 0 || got.Fence == want.Fence)
	case got.Result == ResultHeld && got.Epoch == 0:
		return true // the answer does not carry the live lease
	case got.Result == ResultHeld, got.Result == ResultOK && in.Op != "release" && in.Op != "tenure" && in.Op != "tx":
		return want.Holder == got.Holder && want.Epoch == got.Epoch && want.GrantedAt == got.GrantedAt && want.ExpiresAt == got.ExpiresAt
	}
	return true
}

// Model is the authority and the fence of each resource, for porcupine:
// the history is partitioned by resource, and an operation whose outcome
// is unknown (Output.Result ResultUnknown, or ResultKilled) may or may
// not have taken effect.
var Model = porcupine.NondeterministicModel{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byResource := map[string][]porcupine.Operation{}
		var order []string
		for _, op := range history {
			r := op.Input.(Input).Resource
			if _, ok := byResource[r]; !ok {
				order = append(order, r)
			}
			byResource[r] = append(byResource[r], op)
		}
		parts := make([][]porcupine.Operation, 0, len(order))
		for _, r := range order {
			parts = append(parts, byResource[r])
		}
		return parts
	},
	Init: func() []any { return []any{modelState{}} },
	Step: func(state, input, output any) []any {
		s, in, got := state.(modelState), input.(Input), output.(Output)
		if in.ServerTime {
			return s.stepServer(in, got)
		}
		next, want := s.step(in)
		if got.Result == ResultUnknown || got.Result == ResultKilled {
			// Either nothing happened, or what the model does; where the
			// call returned the lease it would have granted, that one.
			if want.Result != ResultOK || (got.Epoch != 0 && got.Epoch != want.Epoch) || next == s {
				return []any{s}
			}
			return []any{s, next}
		}
		if !matches(in, want, got) {
			return nil
		}
		return []any{next}
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(Input), output.(Output)
		switch in.Op {
		case "acquire":
			return fmt.Sprintf("%s acquire@%d ttl %d -> %s %d..%d (%s)", in.Holder, in.Now, in.TTL, out.Result, out.GrantedAt, out.ExpiresAt, out.Holder)
		case "renew", "release":
			return fmt.Sprintf("%s %s epoch %d @%d -> %s until %d", in.Holder, in.Op, in.Epoch, in.Now, out.Result, out.ExpiresAt)
		case "holder":
			return fmt.Sprintf("holder@%d -> %s %s %d", in.Now, out.Result, out.Holder, out.Epoch)
		case "tx":
			return fmt.Sprintf("%s tx epoch %d seq %d -> %s", in.Holder, in.Epoch, in.Seq, out.Result)
		case "count":
			return fmt.Sprintf("%s count after tenure %d -> %d rows", in.Holder, in.Epoch, out.Seq)
		case "write":
			return fmt.Sprintf("%s write epoch %d %q -> %s %d/%d %q", in.Holder, in.Epoch, in.Value, out.Outcome, out.Fence, out.ValueEpoch, out.Value)
		case "fence":
			return fmt.Sprintf("%s fence epoch %d -> %s %d/%d %q", in.Holder, in.Epoch, out.Outcome, out.Fence, out.ValueEpoch, out.Value)
		case "tool":
			return fmt.Sprintf("%s %s call epoch %d -> %s (newest %d)", in.Holder, in.Value, in.Epoch, out.Outcome, out.Fence)
		case "read":
			return fmt.Sprintf("%s read -> found %v %d/%d %q", in.Holder, out.Found, out.Fence, out.ValueEpoch, out.Value)
		case "final":
			return fmt.Sprintf("final: epoch %d %q %d..%d last %d, fence %d, %d rows, value %d %q",
				out.Epoch, out.Holder, out.GrantedAt, out.ExpiresAt, out.LastTick, out.Fence, out.Seq, out.ValueEpoch, out.Value)
		}
		return fmt.Sprintf("%s %s epoch %d -> %s", in.Holder, in.Op, in.Epoch, out.Result)
	},
	DescribeState: func(state any) string {
		s := state.(modelState)
		return fmt.Sprintf("epoch %d %q held=%v %d..%d last %d vague=%v | fence %d seq %d value %d %q | tools %v",
			s.Epoch, s.Holder, s.Held, s.GrantedAt, s.ExpiresAt, s.LastTick, s.Vague, s.Fence, s.Seq, s.ValueEpoch, s.Value, s.Tools)
	},
}
