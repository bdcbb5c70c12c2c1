package mcpfence_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"leases"
	"leases/mcpfence"
)

// Every answer of a tool whose effect is rows: done now, a replay from
// the record (its stored result, marked, and no second row), a conflict
// (same key, other arguments), stale (an epoch below the newest the
// server has admitted, even for a key that was done), and a new key of
// the newer epoch.
func TestRowsToolAnswersFromTheRecord(t *testing.T) {
	ts := newToolServer(t)
	cs := connect(t, ts.server())
	first := call(t, cs, "add_note", Note{Text: "x"}, token("r", 2, "a"))
	want(t, first, leases.Accepted, false)
	steps := []struct {
		name      string
		arguments any
		meta      mcp.Meta
		outcome   leases.Outcome
		isError   bool
		rows      int
		says      []string
	}{
		{"replay", Note{Text: "x"}, token("r", 2, "a"), leases.Replay, false, 1, nil},
		{"conflict", Note{Text: "y"}, token("r", 2, "a"), leases.Conflict, true, 1, []string{`key "a"`, "new key"}},
		{"newer epoch", Note{Text: "z"}, token("r", 3, "b"), leases.Accepted, false, 2, nil},
		{"stale", Note{Text: "w"}, token("r", 2, "c"), leases.Stale, true, 2, []string{"epoch 2", "below 3", "stop"}},
		{"stale replay", Note{Text: "x"}, token("r", 2, "a"), leases.Stale, true, 2, []string{"below 3"}},
		{"other resource", Note{Text: "x"}, token("s", 1, "a"), leases.Accepted, false, 3, nil},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			res := call(t, cs, "add_note", step.arguments, step.meta)
			want(t, res, step.outcome, step.isError, step.says...)
			if n := ts.rows(t); n != step.rows {
				t.Fatalf("%d rows, want %d", n, step.rows)
			}
			switch step.outcome {
			case leases.Replay:
				if !reflect.DeepEqual(res.Content, first.Content) || !reflect.DeepEqual(res.StructuredContent, first.StructuredContent) {
					t.Fatalf("replay answered %s %v, the first call %s %v", text(res), res.StructuredContent, text(first), first.StructuredContent)
				}
			case leases.Stale:
				if newest, _ := res.Meta[mcpfence.MetaNewestEpoch].(float64); newest != 3 {
					t.Fatalf("stale answer's %s: %v, want 3", mcpfence.MetaNewestEpoch, res.Meta[mcpfence.MetaNewestEpoch])
				}
			}
		})
	}
}

// The same arguments encoded otherwise (keys in another order, spaces)
// are the same operation: a replay, not a conflict.
func TestRetryEncodedOtherwiseIsAReplay(t *testing.T) {
	ts := newToolServer(t)
	cs := connect(t, ts.server())
	want(t, call(t, cs, "add_note", map[string]any{"text": "x", "author": "me"}, token("r", 1, "a")), leases.Accepted, false)
	want(t, call(t, cs, "add_note", json.RawMessage(` { "text" : "x", "author": "me" } `), token("r", 1, "a")), leases.Replay, false)
	if n := ts.rows(t); n != 1 {
		t.Fatalf("%d rows, want 1", n)
	}
}

// A call without its token, or with one that is malformed, is a tool
// error saying what is missing, and does nothing.
func TestMissingOrMalformedTokenSaysWhat(t *testing.T) {
	ts := newToolServer(t)
	cs := connect(t, ts.server())
	for _, tc := range []struct {
		name string
		meta mcp.Meta
		says []string
	}{
		{"none", nil, []string{"missing _meta leases/resource, leases/epoch, leases/key", "mcpfence.Client"}},
		{"no key", mcp.Meta{mcpfence.MetaResource: "r", mcpfence.MetaEpoch: 1}, []string{"missing _meta leases/key"}},
		{"epoch text", token("r", "1", "a"), []string{"malformed _meta leases/epoch (a positive integer)"}},
		{"epoch zero", token("r", 0, "a"), []string{"malformed _meta leases/epoch"}},
		{"epoch negative", token("r", -2, "a"), []string{"malformed _meta leases/epoch"}},
		{"epoch fraction", token("r", 1.5, "a"), []string{"malformed _meta leases/epoch"}},
		{"empty key", token("r", 1, ""), []string{"malformed _meta leases/key"}},
		{"resource number", mcp.Meta{mcpfence.MetaResource: 7, mcpfence.MetaEpoch: 1, mcpfence.MetaKey: "a"}, []string{"malformed _meta leases/resource"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want(t, call(t, cs, "add_note", Note{Text: "x"}, tc.meta), "", true, tc.says...)
			want(t, call(t, cs, "send", Send{To: "x"}, tc.meta), "", true, tc.says...)
			if n, sent := ts.rows(t), ts.sent.Load(); n != 0 || sent != 0 {
				t.Fatalf("%d rows and %d sends after a call without a token; want none", n, sent)
			}
		})
	}
}
