package mcpfence_test

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"leases/fence"
	"leases/internal/roles"
	"leases/mcpfence"
	"leases/ops"
	"leases/session"
	"leases/sqlite"
)

// The example's tool server and its agents, as processes of their own:
// this test binary re-executed in their roles.
var (
	serverRole = roles.Register("mcpfence-tool-server", playServer)
	agentRole  = roles.Register("mcpfence-agent", playAgent)
)

// playServer serves the example's tools (tools) over the SDK's
// streamable HTTP transport on a loopback port, on the database in the
// directory args[0], and says "listening URL" on stdout once the port is
// bound. It serves until its stdin closes (its parent ended).
func playServer(args []string) int {
	ctx := context.Background()
	server, db, err := openTools(ctx, args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, "tool server:", err)
		return 1
	}
	defer db.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "tool server:", err)
		return 1
	}
	addHangingAppend(server, db, args[0])
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	go func() { _ = http.Serve(ln, handler) }()
	fmt.Printf("listening http://%s/\n", ln.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// addHangingAppend adds append_line_then_hang to the example's tools:
// append_line's effect, after which the server says "effect done" on
// stdout and hangs, never recording the answer (for the test to kill it
// between the effect and its completion).
func addHangingAppend(server *mcp.Server, db *sql.DB, dir string) {
	table, err := ops.New(db, ops.Options{Dialect: fence.SQLite})
	if err != nil {
		panic(err) // the example's own table: opened by openTools already
	}
	mcp.AddTool(server, &mcp.Tool{Name: "append_line_then_hang"}, mcpfence.External(table,
		func(ctx context.Context, _ *mcp.CallToolRequest, in Line) (*mcp.CallToolResult, Appended, error) {
			err := appendLine(filepath.Join(dir, "lines.log"), in.Line)
			fmt.Println("effect done", err)
			select {}
		}))
}

// reply is the agent's answer to one command, a line of JSON.
type reply struct {
	Epoch   int64  `json:"epoch,omitempty"`
	Outcome string `json:"outcome,omitempty"`
	IsError bool   `json:"is_error,omitempty"`
	Text    string `json:"text,omitempty"`
	Newest  int64  `json:"newest,omitempty"`
	Err     string `json:"err,omitempty"`
	Ended   bool   `json:"ended,omitempty"`
}

// playAgent is an agent of the tool server at args[1], holding the lease
// on "notes" as holder args[2] (time-to-live args[3]) in the SQLite store
// args[0]. It answers each command on stdin with a line of JSON:
//
//	start                    wait for the lease: {"epoch"}
//	call TOOL ARGS [KEY]     call through mcpfence.Client
//	late TOOL ARGS KEY       call with the session's token, unchecked: an
//	                         agent that checked its session, then was paused
//	connect URL              connect to the tool server at URL instead
func playAgent(args []string) int {
	ctx := context.Background()
	ttl, err := time.ParseDuration(args[3])
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		return 2
	}
	store, err := sqlite.Open(ctx, args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		return 1
	}
	defer store.Close()
	transport := &mcp.StreamableClientTransport{Endpoint: args[1], DisableStandaloneSSE: true, MaxRetries: -1}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: args[2]}, nil).Connect(ctx, transport, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		return 1
	}
	defer cs.Close()
	var s *session.Session
	out := json.NewEncoder(os.Stdout)
	for lines := bufio.NewScanner(os.Stdin); lines.Scan(); {
		var r reply
		switch f := strings.Fields(lines.Text()); f[0] {
		case "start":
			if s, err = session.Wait(ctx, store.Lessor(), "notes", args[2], session.Options{TTL: ttl}); err == nil {
				defer s.Close(context.Background())
				r.Epoch = s.Epoch()
			}
		case "connect":
			_ = cs.Close()
			transport := &mcp.StreamableClientTransport{Endpoint: f[1], DisableStandaloneSSE: true, MaxRetries: -1}
			cs, err = mcp.NewClient(&mcp.Implementation{Name: args[2]}, nil).Connect(ctx, transport, nil)
		case "call":
			callCtx := ctx
			if len(f) > 3 {
				callCtx = mcpfence.WithKey(ctx, f[3])
			}
			res, callErr := mcpfence.NewClient(cs, s).CallTool(callCtx, &mcp.CallToolParams{Name: f[1], Arguments: json.RawMessage(f[2])})
			r, err = answered(res, callErr), nil
		case "late":
			meta := mcp.Meta{mcpfence.MetaResource: "notes", mcpfence.MetaEpoch: s.Epoch(), mcpfence.MetaKey: f[3]}
			res, callErr := cs.CallTool(ctx, &mcp.CallToolParams{Name: f[1], Arguments: json.RawMessage(f[2]), Meta: meta})
			r, err = answered(res, callErr), nil
		}
		if err != nil {
			r.Err = err.Error()
		}
		if err := out.Encode(r); err != nil {
			return 1
		}
	}
	return 0
}

// answered is the reply for a call's result or error.
func answered(res *mcp.CallToolResult, err error) reply {
	if err != nil {
		return reply{Err: err.Error(), Ended: errors.Is(err, session.ErrEnded)}
	}
	newest, _ := res.Meta[mcpfence.MetaNewestEpoch].(float64)
	return reply{Outcome: string(mcpfence.Outcome(res)), IsError: res.IsError, Text: text(res), Newest: int64(newest)}
}
