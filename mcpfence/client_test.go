package mcpfence_test

import (
	"context"
	"errors"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"leases"
	"leases/mcpfence"
	"leases/session"
	"leases/testkit/sqlitetest"
	"leases/testkit/testctx"
)

// startSession starts holder's session on resource "r" of lessor,
// closed when the test ends.
func startSession(t *testing.T, lessor leases.Lessor, holder string) *session.Session {
	t.Helper()
	s, err := session.Start(testctx.Context(t), lessor, "r", holder, session.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// The client attaches the session's token and a key: derived, the same
// call is the same operation (a retry is a replay); named with WithKey,
// two calls with the same arguments are two operations. Once the session
// has ended it refuses to call, and nothing reaches the server; the next
// holder's same call is a new operation of its epoch.
func TestClientAttachesTheSessionsToken(t *testing.T) {
	ctx := testctx.Context(t)
	ts := newToolServer(t)
	cs := connect(t, ts.server())
	lessor := sqlitetest.Open(t, sqlitetest.Path(t)).Lessor()
	sa := startSession(t, lessor, "A")
	a := mcpfence.NewClient(cs, sa)
	note := &mcp.CallToolParams{Name: "add_note", Arguments: Note{Text: "x"}}
	for _, step := range []struct {
		ctx     context.Context
		outcome leases.Outcome
		rows    int
	}{
		{ctx, leases.Accepted, 1},
		{ctx, leases.Replay, 1}, // a retry: the same derived key
		{mcpfence.WithKey(ctx, "second"), leases.Accepted, 2},
		{mcpfence.WithKey(ctx, "second"), leases.Replay, 2},
	} {
		res, err := a.CallTool(step.ctx, note)
		if err != nil {
			t.Fatal(err)
		}
		want(t, res, step.outcome, false)
		if n := ts.rows(t); n != step.rows {
			t.Fatalf("%d rows, want %d", n, step.rows)
		}
	}
	if note.Meta != nil {
		t.Fatalf("CallTool changed its caller's params: %v", note.Meta)
	}

	if err := sa.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.CallTool(ctx, note); !errors.Is(err, session.ErrEnded) {
		t.Fatalf("call after the session ended: %v, want an error matching session.ErrEnded", err)
	}
	b := mcpfence.NewClient(cs, startSession(t, lessor, "B"))
	res, err := b.CallTool(ctx, note)
	if err != nil {
		t.Fatal(err)
	}
	want(t, res, leases.Accepted, false)
	if n := ts.rows(t); n != 3 {
		t.Fatalf("%d rows, want 3", n)
	}
	// A's token, sent by hand after B's call: the server refuses it.
	stale := call(t, cs, "add_note", Note{Text: "late"}, token("r", sa.Epoch(), "late"))
	want(t, stale, leases.Stale, true, "stop")
}
