package mcpfence_test

import (
	"reflect"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"leases"
	"leases/mcpfence"
	"leases/testkit/testctx"
)

// A tool with an outside effect: a retry while the first call runs is
// told "in progress" (retry later) and does nothing; once the first call
// has answered, a retry is answered from the record; the effect happened
// once. Stale and conflicting calls are refused before any effect.
func TestOutsideEffectOnceAndInProgress(t *testing.T) {
	ts := newToolServer(t)
	ts.inSend, ts.release = make(chan struct{}), make(chan struct{})
	cs := connect(t, ts.server())
	firstDone := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(testctx.Context(t), &mcp.CallToolParams{Name: "send", Arguments: Send{To: "ops"}, Meta: token("r", 1, "k")})
		if err != nil {
			t.Error(err)
		}
		firstDone <- res
	}()
	<-ts.inSend // the first call's effect has begun, its record is pending
	retry := call(t, cs, "send", Send{To: "ops"}, token("r", 1, "k"))
	want(t, retry, leases.InProgress, true, "in progress", "retry the same call")
	if after, _ := retry.Meta[mcpfence.MetaRetryAfter].(float64); after != 1 {
		t.Fatalf("in-progress answer's %s: %v, want 1", mcpfence.MetaRetryAfter, retry.Meta[mcpfence.MetaRetryAfter])
	}
	close(ts.release)
	ts.inSend = nil
	first := <-firstDone
	want(t, first, leases.Accepted, false)
	replay := call(t, cs, "send", Send{To: "ops"}, token("r", 1, "k"))
	want(t, replay, leases.Replay, false)
	if !reflect.DeepEqual(replay.StructuredContent, first.StructuredContent) || !reflect.DeepEqual(replay.Content, first.Content) {
		t.Fatalf("replay answered %s, the first call %s", text(replay), text(first))
	}
	want(t, call(t, cs, "send", Send{To: "dev"}, token("r", 1, "k")), leases.Conflict, true, "new key")
	want(t, call(t, cs, "send", Send{To: "ops"}, token("r", 2, "k")), leases.Accepted, false)
	want(t, call(t, cs, "send", Send{To: "ops"}, token("r", 1, "other")), leases.Stale, true, "below 2")
	if n := ts.sent.Load(); n != 2 {
		t.Fatalf("send's effect happened %d times, want 2 (one per epoch)", n)
	}
}

// A tool error of an outside effect is its answer: recorded, and a retry
// gets it again without a second effect (the effect may have been partly
// done). A tool error of a rows tool rolls its rows back and records
// nothing: a retry runs it again.
func TestToolErrors(t *testing.T) {
	ts := newToolServer(t)
	cs := connect(t, ts.server())
	ts.fail.Store(true)
	want(t, call(t, cs, "send", Send{To: "ops"}, token("r", 1, "k")), leases.Accepted, true, "ops refused the message")
	want(t, call(t, cs, "send", Send{To: "ops"}, token("r", 1, "k")), leases.Replay, true, "ops refused the message")
	if n := ts.sent.Load(); n != 1 {
		t.Fatalf("send's effect happened %d times, want 1", n)
	}
	ts.fail.Store(true)
	failed := call(t, cs, "add_note", Note{Text: "x"}, token("r", 1, "n"))
	want(t, failed, "", true, "add_note failed after its insert")
	if n := ts.rows(t); n != 0 {
		t.Fatalf("%d rows after add_note failed; want its insert rolled back", n)
	}
	want(t, call(t, cs, "add_note", Note{Text: "x"}, token("r", 1, "n")), leases.Accepted, false)
	if n := ts.rows(t); n != 1 {
		t.Fatalf("%d rows, want 1", n)
	}
}
