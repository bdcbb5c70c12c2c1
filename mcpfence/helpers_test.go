package mcpfence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"leases"
	"leases/fence"
	"leases/mcpfence"
	"leases/ops"
	"leases/testkit/sqlitetest"
	"leases/testkit/testctx"
)

// Note is add_note's input, and Added its output.
type Note struct {
	Text   string `json:"text"`
	Author string `json:"author,omitempty"`
}

// Added is the row add_note wrote.
type Added struct {
	ID int64 `json:"id"`
}

// Send is send's input, and Sent its output.
type Send struct {
	To string `json:"to"`
}

// Sent counts the effects send had when it answered.
type Sent struct {
	Count int64 `json:"count"`
}

// toolServer is a test's MCP server: add_note writes a row in its SQLite
// database (Handler), send has an outside effect, counted (External).
type toolServer struct {
	db    *sql.DB
	table *ops.Table
	sent  atomic.Int64
	// inSend, when set, is told when send has begun its effect, and send
	// waits for release before it ends.
	inSend, release chan struct{}
	// fail makes the next add_note fail (and roll back), or send answer
	// with an error (recorded).
	fail atomic.Bool
}

func newToolServer(t testing.TB) *toolServer { return newToolServerOn(t, "") }

// newToolServerOn is newToolServer on a file opened with pragmas added
// to the DSN.
func newToolServerOn(t testing.TB, pragmas string) *toolServer {
	t.Helper()
	ctx := testctx.Context(t)
	// As a tool server opens its file: WAL, one connection, a busy timeout.
	db, err := sql.Open("sqlite", sqlitetest.Path(t)+"?_txlock=immediate&_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)"+pragmas)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { _ = db.Close() })
	table, err := ops.New(db, ops.Options{Dialect: fence.SQLite})
	if err == nil {
		err = table.Create(ctx)
	}
	if err == nil {
		_, err = db.ExecContext(ctx, `CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT NOT NULL)`)
	}
	if err != nil {
		t.Fatal(err)
	}
	return &toolServer{db: db, table: table}
}

func (ts *toolServer) addNote(ctx context.Context, tx *sql.Tx, _ *mcp.CallToolRequest, in Note) (*mcp.CallToolResult, Added, error) {
	out, err := insertNote(ctx, tx, in)
	if err == nil && ts.fail.CompareAndSwap(true, false) {
		err = errors.New("add_note failed after its insert")
	}
	return nil, out, err
}

func (ts *toolServer) send(ctx context.Context, _ *mcp.CallToolRequest, in Send) (*mcp.CallToolResult, Sent, error) {
	n := ts.sent.Add(1)
	if ts.inSend != nil {
		ts.inSend <- struct{}{}
		<-ts.release
	}
	if ts.fail.CompareAndSwap(true, false) {
		return nil, Sent{}, fmt.Errorf("%s refused the message", in.To)
	}
	return nil, Sent{Count: n}, nil
}

// server is the MCP server of ts's tools, wrapped.
func (ts *toolServer) server() *mcp.Server {
	server := mcp.NewServer(&mcp.Implementation{Name: "tools"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "add_note"}, mcpfence.Handler(ts.table, ts.addNote))
	mcp.AddTool(server, &mcp.Tool{Name: "send"}, mcpfence.External(ts.table, ts.send))
	return server
}

// rows counts add_note's rows.
func (ts *toolServer) rows(t testing.TB) int {
	t.Helper()
	var n int
	if err := ts.db.QueryRow(`SELECT count(*) FROM notes`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// connect connects a client to server over the SDK's in-memory
// transports.
func connect(t testing.TB, server *mcp.Server) *mcp.ClientSession {
	t.Helper()
	ctx := testctx.Context(t)
	serverSide, clientSide := mcp.NewInMemoryTransports()
	ss, err := server.Connect(ctx, serverSide, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent"}, nil).Connect(ctx, clientSide, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// token is a call's _meta, as a client that is not mcpfence.Client may
// send it.
func token(resource string, epoch any, key string) mcp.Meta {
	return mcp.Meta{mcpfence.MetaResource: resource, mcpfence.MetaEpoch: epoch, mcpfence.MetaKey: key}
}

// call calls tool with arguments and meta, through no wrapper.
func call(t testing.TB, cs *mcp.ClientSession, tool string, arguments any, meta mcp.Meta) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(testctx.Context(t), &mcp.CallToolParams{Name: tool, Arguments: arguments, Meta: meta})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// text is a result's text content, joined.
func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// want checks a result's outcome, whether it is an error, and that its
// text has each of fragments.
func want(t testing.TB, res *mcp.CallToolResult, outcome leases.Outcome, isError bool, fragments ...string) {
	t.Helper()
	if got := mcpfence.Outcome(res); got != outcome || res.IsError != isError {
		t.Fatalf("outcome %q, IsError %v (%s); want %q, IsError %v", got, res.IsError, text(res), outcome, isError)
	}
	for _, f := range fragments {
		if !strings.Contains(text(res), f) {
			t.Fatalf("text %q does not say %q", text(res), f)
		}
	}
}

// countNotes counts the example's notes in the database at path.
func countNotes(t testing.TB, path string) int {
	t.Helper()
	db := sqlitetest.OpenDirectly(t, path)
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM notes`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
