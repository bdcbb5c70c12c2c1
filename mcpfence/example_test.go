package mcpfence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"leases"
	"leases/fence"
	"leases/mcpfence"
	"leases/ops"
	"leases/session"
	"leases/sqlite"
)

// Line is append_line's input.
type Line struct {
	Line string `json:"line"`
}

// Appended is append_line's output: the bytes it appended.
type Appended struct {
	Bytes int `json:"bytes"`
}

// tools is an example tool server, fenced by its callers' leases:
// add_note writes a row in the server's own database, in the record's
// transaction (mcpfence.Handler); append_line appends a line to the file
// at lines, an effect outside the database, between the record's pending
// and its completion (mcpfence.External). table is the record, in the
// same database as the notes table; appendLine appends a line to a file
// and syncs it.
//
// Its imports:
//
//	import (
//		"context"
//		"database/sql"
//
//		"github.com/modelcontextprotocol/go-sdk/mcp"
//
//		"leases/mcpfence"
//		"leases/ops"
//	)
func tools(table *ops.Table, lines string) *mcp.Server {
	server := mcp.NewServer(&mcp.Implementation{Name: "notes"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "add_note", Description: "adds a note"}, mcpfence.Handler(table,
		func(ctx context.Context, tx *sql.Tx, _ *mcp.CallToolRequest, in Note) (*mcp.CallToolResult, Added, error) {
			r, err := tx.ExecContext(ctx, `INSERT INTO notes (text) VALUES (?)`, in.Text)
			if err != nil {
				return nil, Added{}, err
			}
			id, err := r.LastInsertId()
			return nil, Added{ID: id}, err
		}))
	mcp.AddTool(server, &mcp.Tool{Name: "append_line", Description: "appends a line to the log"}, mcpfence.External(table,
		func(ctx context.Context, _ *mcp.CallToolRequest, in Line) (*mcp.CallToolResult, Appended, error) {
			err := appendLine(lines, in.Line)
			return nil, Appended{Bytes: len(in.Line) + 1}, err
		}))
	return server
}

// appendLine appends line to the file at path, and syncs it.
func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(line + "\n")
	if err == nil {
		err = f.Sync()
	}
	if closeErr := f.Close(); err == nil {
		err = closeErr
	}
	return err
}

// addNote calls add_note on the MCP server at endpoint (streamable
// HTTP) for the holder of s, and returns what the server's record made
// of the call: leases.Accepted, and for the same call again (a retry)
// leases.Replay, from the record, with no second row.
//
// Its imports:
//
//	import (
//		"context"
//
//		"github.com/modelcontextprotocol/go-sdk/mcp"
//
//		"leases"
//		"leases/mcpfence"
//		"leases/session"
//	)
func addNote(ctx context.Context, endpoint string, s *session.Session, text string) (leases.Outcome, error) {
	transport := &mcp.StreamableClientTransport{Endpoint: endpoint, DisableStandaloneSSE: true}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent"}, nil).Connect(ctx, transport, nil)
	if err != nil {
		return "", err
	}
	defer cs.Close()
	res, err := mcpfence.NewClient(cs, s).CallTool(ctx, &mcp.CallToolParams{Name: "add_note", Arguments: Note{Text: text}})
	if err != nil {
		return "", err // before anything was sent, when the session has ended: session.ErrEnded
	}
	return mcpfence.Outcome(res), nil
}

// openTools opens the example's database in dir, creates its tables,
// and returns the server of its tools.
func openTools(ctx context.Context, dir string) (*mcp.Server, *sql.DB, error) {
	db, err := sql.Open("sqlite", filepath.Join(dir, "tools.db")+
		"?_txlock=immediate&_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	if err != nil {
		return nil, nil, err
	}
	db.SetMaxOpenConns(1)
	table, err := ops.New(db, ops.Options{Dialect: fence.SQLite})
	if err == nil {
		err = table.Create(ctx)
	}
	if err == nil {
		_, err = db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY, text TEXT NOT NULL)`)
	}
	if err != nil {
		_ = db.Close()
		return nil, nil, err
	}
	return tools(table, filepath.Join(dir, "lines.log")), db, nil
}

// An agent holding a lease calls the example's tool server over HTTP:
// its first call is done, the same call again (a retry after a lost
// answer) is answered from the record, and once its session has ended it
// calls no more.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "mcpfence-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	server, db, err := openTools(ctx, dir)
	if err != nil {
		panic(err)
	}
	defer db.Close()
	web := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	defer web.Close()

	store, err := sqlite.Open(ctx, filepath.Join(dir, "leases.db"))
	if err != nil {
		panic(err)
	}
	defer store.Close()
	s, err := session.Start(ctx, store.Lessor(), "notes", "agent-1", session.Options{})
	if err != nil {
		panic(err)
	}
	for range 2 {
		outcome, err := addNote(ctx, web.URL, s, "hello")
		fmt.Println(outcome, err)
	}
	_ = s.Close(ctx)
	_, err = addNote(ctx, web.URL, s, "hello")
	fmt.Println("after the session:", errors.Is(err, session.ErrEnded))
	var notes int
	_ = db.QueryRow(`SELECT count(*) FROM notes`).Scan(&notes)
	fmt.Println("notes:", notes)
	// Output:
	// accepted <nil>
	// replay <nil>
	// after the session: true
	// notes: 1
}
