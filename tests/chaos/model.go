package chaos

import (
	"fmt"

	"github.com/anishathalye/porcupine"
)

// The sequential model of one resource: the authority's lease row and the
// fence table's row, with the business counter. It is written from the
// contract (docs/contract.md, docs/service.md), not from the code under
// test, so that the two can disagree.
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
	// transaction brought; Seq, the number of committed business rows.
	Fence int64
	Seq   int64
}

// Input is an operation of the history as the model takes it.
type Input struct {
	Op       string // acquire, renew, release, holder, tenure, read, tx, final
	Resource string
	Holder   string
	Epoch    int64 // renew, release: the held lease's; tenure, tx: the tenure's
	Now, TTL int64 // the authority's ticks
	Seq      int64 // tx: the sequence number its row committed with
	// ServerTime: the server's clock chose the tick, and Now is unknown
	// (stepServer); on a tx, it was admitted by the server-clock guard.
	ServerTime bool
}

// Output is what the operation answered: one of the results, and for an
// authority's call the lease it answered with.
type Output struct {
	Result    string
	Holder    string
	Epoch     int64
	GrantedAt int64
	ExpiresAt int64
	Last      int64
	// Seq is the counter a read found; for the final look, with Fence.
	Seq, Fence int64
}

// step is the model's transition for in: the state after it and what
// the operation answers. An operation that changes nothing returns s.
func (s modelState) step(in Input) (modelState, Output) {
	switch in.Op {
	case "acquire":
		if in.Now < s.LastTick {
			return s, Output{Result: resultBackwards, Last: s.LastTick}
		}
		if s.Held && in.Now < s.ExpiresAt {
			return s, s.lease(resultHeld)
		}
		s.Epoch++
		s.Holder, s.Held, s.GrantedAt, s.ExpiresAt, s.LastTick = in.Holder, true, in.Now, in.Now+in.TTL, in.Now
		return s, s.lease(resultOK)
	case "renew", "release":
		switch {
		case s.Epoch == 0:
			return s, Output{Result: resultNotHolder}
		case in.Now < s.LastTick:
			return s, Output{Result: resultBackwards, Last: s.LastTick}
		case s.Epoch != in.Epoch || !s.Held || s.Holder != in.Holder:
			return s, Output{Result: resultNotHolder}
		case in.Now >= s.ExpiresAt:
			return s, Output{Result: resultExpired}
		}
		s.LastTick = in.Now
		if in.Op == "release" {
			s.Holder, s.Held, s.ExpiresAt = "", false, in.Now
			return s, Output{Result: resultOK}
		}
		s.ExpiresAt = max(s.ExpiresAt, in.Now+in.TTL) // never earlier
		return s, s.lease(resultOK)
	case "holder":
		if s.Held && in.Now < s.ExpiresAt {
			return s, s.lease(resultOK)
		}
		return s, Output{Result: resultNone}
	case "tenure":
		if in.Epoch < s.Fence {
			return s, Output{Result: resultSuperseded}
		}
		if in.Epoch > s.Epoch {
			return s, Output{Result: "never-granted"}
		}
		s.Fence = in.Epoch
		return s, Output{Result: resultOK}
	case "read":
		return s, Output{Result: resultOK, Seq: s.Seq}
	case "final":
		// What the databases hold once every worker has exited.
		return s, Output{Result: resultOK, Epoch: s.Epoch, Fence: s.Fence, Seq: s.Seq}
	case "tx":
		if in.Epoch < s.Fence {
			return s, Output{Result: resultSuperseded}
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
		return s, Output{Result: resultOK}
	}
	panic("chaos model: unknown operation " + in.Op)
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
	switch {
	case got.Result == resultBackwards:
		return want.Last == got.Last
	case in.Op == "read":
		return want.Seq == got.Seq
	case in.Op == "final":
		return want == got
	case got.Result == resultHeld, got.Result == resultOK && in.Op != "release" && in.Op != "tenure" && in.Op != "tx":
		return want.Holder == got.Holder && want.Epoch == got.Epoch && want.GrantedAt == got.GrantedAt && want.ExpiresAt == got.ExpiresAt
	}
	return true
}

// Model is the authority and the fence of each resource, for porcupine:
// the history is partitioned by resource, and an operation whose outcome
// is unknown (Output.Result resultUnknown, or resultKilled) may or may
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
		if got.Result == resultUnknown || got.Result == resultKilled {
			// Either nothing happened, or what the model does; where the
			// call returned the lease it would have granted, that one.
			if want.Result != resultOK || (got.Epoch != 0 && got.Epoch != want.Epoch) {
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
		case "read":
			return fmt.Sprintf("%s read after tenure %d -> %d rows", in.Holder, in.Epoch, out.Seq)
		case "final":
			return fmt.Sprintf("final: epoch %d, fence %d, %d rows", out.Epoch, out.Fence, out.Seq)
		}
		return fmt.Sprintf("%s %s epoch %d -> %s", in.Holder, in.Op, in.Epoch, out.Result)
	},
	DescribeState: func(state any) string {
		s := state.(modelState)
		return fmt.Sprintf("epoch %d %q held=%v %d..%d last %d vague=%v | fence %d seq %d",
			s.Epoch, s.Holder, s.Held, s.GrantedAt, s.ExpiresAt, s.LastTick, s.Vague, s.Fence, s.Seq)
	},
}
