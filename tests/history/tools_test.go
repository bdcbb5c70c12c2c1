package history

import (
	"strings"
	"testing"

	"github.com/anishathalye/porcupine"

	"leases"
)

// The tool path's checks on histories made by hand: a sound run passes
// them all, and each fault breaks the one check it should.
func TestToolChecksCatchEachFault(t *testing.T) {
	k1 := ToolKey{Server: "http", Resource: "r", Epoch: 1, Key: "a-1-0"}
	k2 := ToolKey{Server: "http", Resource: "r", Epoch: 2, Key: "b-2-0"}
	tool := func(k ToolKey, t int64, ret *Record) *Op {
		if ret != nil {
			ret.T = t + 5
		}
		return &Op{Worker: k.Key[:1], Ret: ret,
			Call: Record{Kind: "call", Op: "tool", Resource: k.Resource, Epoch: k.Epoch, OpID: k.Key, Value: k.Server, Tool: "rows", T: t}}
	}
	answer := func(o leases.Outcome, body string) *Record { return &Record{Result: ResultOK, Outcome: o, Body: body} }
	// sound: k1 accepted, its answer lost on a retry and then replayed;
	// k2 accepted; a stale call of epoch 1 refused with 2.
	sound := func() *History {
		grant := func(holder string, epoch, now int64) *Op {
			return &Op{Worker: holder, Call: Record{Kind: "call", Op: "acquire", Resource: "r", Holder: holder, Now: now, TTL: 100, T: now},
				Ret: &Record{Result: ResultOK, T: now + 1, Lease: &leases.Lease{Resource: "r", Holder: holder, Epoch: epoch, GrantedAt: now, ExpiresAt: now + 100}}}
		}
		return &History{
			Epochs: map[string]int64{"r": 2},
			Ops: []*Op{
				grant("a", 1, 1),
				grant("b", 2, 101),
				tool(k1, 10, answer(leases.Accepted, "one")),
				tool(k1, 20, &Record{Result: ResultUnknown}),
				tool(k1, 30, answer(leases.Replay, "one")),
				tool(k2, 140, answer(leases.Accepted, "two")),
				tool(ToolKey{Server: "http", Resource: "r", Epoch: 1, Key: "a-1-1"}, 150, &Record{Result: ResultOK, Outcome: leases.Stale, Newest: 2}),
			},
			Tools: &ToolState{
				Records:    map[ToolKey]ToolRecord{k1: {State: "done", Tool: "rows", Body: "one"}, k2: {State: "done", Tool: "rows", Body: "two"}},
				Effects:    []ToolEffect{{ToolKey: k1, Tool: "rows", Seq: 1}, {ToolKey: k2, Tool: "rows", Seq: 2}},
				Admissions: []ToolAdmission{{ToolKey: k1, Seq: 1}, {ToolKey: k2, Seq: 2}},
				External:   map[string]bool{"append": true},
			},
		}
	}
	for _, c := range []struct {
		name  string
		fault func(h *History)
		check string // the check that must fail; "" for none
	}{
		{"sound", func(*History) {}, ""},
		{"an effect twice", func(h *History) {
			h.Tools.Effects = append(h.Tools.Effects, ToolEffect{ToolKey: k2, Tool: "rows", Seq: 3})
		}, "each operation's effect at most once"},
		{"an admission below a newer one", func(h *History) {
			h.Tools.Admissions = []ToolAdmission{{ToolKey: k2, Seq: 1}, {ToolKey: k1, Seq: 2}}
		}, "no effect of an epoch below"},
		{"a replay not from the record", func(h *History) { h.Ops[4].Ret.Body = "one, again" }, "every accepted or replayed answer"},
		{"a stale refusal naming no newer epoch", func(h *History) { h.Ops[6].Ret.Newest = 1 }, "every stale refusal"},
		{"a lost answer, no record, an effect", func(h *History) {
			lost := ToolKey{Server: "http", Resource: "r", Epoch: 2, Key: "b-2-1"}
			h.Ops = append(h.Ops, tool(lost, 160, nil))
			h.Tools.Effects = append(h.Tools.Effects, ToolEffect{ToolKey: lost, Tool: "rows", Seq: 3})
		}, "every call whose answer was lost resolved by the record"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := sound()
			c.fault(h)
			var failed []string
			for _, check := range ToolChecks() {
				if bad := check.Run(h); len(bad) > 0 {
					failed = append(failed, check.Name+": "+strings.Join(bad, "; "))
				}
			}
			switch {
			case c.check == "" && len(failed) > 0:
				t.Fatalf("a sound history fails: %v", failed)
			case c.check != "" && !strings.Contains(strings.Join(failed, "\n"), c.check):
				t.Fatalf("failed %v; want %q among them", failed, c.check)
			}
			if v := VerifyTools(h, Options{}); c.check == "" && v.Found() > 0 {
				t.Fatalf("verdict on a sound history: %v", v)
			}
		})
	}
}

// Porcupine on the tool path: a call of epoch 1 sent after epoch 2 was
// admitted, answered as done, is not linearizable; refused stale, it is.
func TestToolCallsLinearizable(t *testing.T) {
	grant := func(holder string, epoch, now int64) *Op {
		return &Op{Worker: holder, Call: Record{Kind: "call", Op: "acquire", Resource: "r", Holder: holder, Now: now, TTL: 100, T: now},
			Ret: &Record{Result: ResultOK, T: now + 1, Lease: &leases.Lease{Resource: "r", Holder: holder, Epoch: epoch, GrantedAt: now, ExpiresAt: now + 100}}}
	}
	call := func(holder string, epoch, at int64, ret Record) *Op {
		ret.T, ret.Result = at+5, ResultOK
		return &Op{Worker: holder, Call: Record{Kind: "call", Op: "tool", Resource: "r", Holder: holder, Epoch: epoch, Value: "mcp", T: at}, Ret: &ret}
	}
	for _, c := range []struct {
		name string
		late Record
		want porcupine.CheckResult
	}{
		{"refused stale", Record{Outcome: leases.Stale, Newest: 2}, porcupine.Ok},
		{"answered done", Record{Outcome: leases.Accepted}, porcupine.Illegal},
		{"refused stale naming epoch 3", Record{Outcome: leases.Stale, Newest: 3}, porcupine.Illegal},
	} {
		t.Run(c.name, func(t *testing.T) {
			late := call("a", 1, 150, c.late)
			late.Call.T = 20                          // invoked before the next grant...
			late.Sent = &Record{Kind: "sent", T: 150} // ...and sent after epoch 2 was admitted
			h := &History{Epochs: map[string]int64{"r": 2}, Ops: []*Op{
				grant("a", 1, 1), late, grant("b", 2, 101), call("b", 2, 120, Record{Outcome: leases.Accepted}),
			}}
			if got, _, _ := h.Linearizable(0); got != c.want {
				t.Fatalf("porcupine: %v; want %v", got, c.want)
			}
		})
	}
}
