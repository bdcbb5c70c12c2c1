package toolchaos

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	_ "modernc.org/sqlite" // the tool servers' databases

	"leases/fence"
	"leases/httpfence"
	"leases/mcpfence"
	"leases/ops"
)

// The tools every server offers: one writing a row in the record's
// transaction, one appending a line to a file, an effect outside the
// database, through the pending record.
const (
	ToolRows   = "rows"
	ToolAppend = "append"
)

// The servers, by the name the history gives them.
const (
	ServerHTTP = "http"
	ServerMCP  = "mcp"
)

// The server's own tables and file: the rows tool's effects, numbered in
// commit order; every insert of a record, numbered in commit order by a
// trigger (the admissions); the append tool's lines.
const (
	EffectsTable    = "tool_effects"
	AdmissionsTable = "tool_admissions"
	LinesFile       = "lines.log"
)

// DSN is the SQLite database of the tool server whose directory is dir.
func DSN(dir string) string {
	return "file:" + filepath.Join(dir, "tools.db") + "?_txlock=immediate&_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)"
}

// Note is both tools' input: the agent's name for the operation, which
// the effect does not need (it takes the token's key) but which makes
// the request its own.
type Note struct {
	Note string `json:"note"`
}

// Row is the rows tool's answer: the effect's number and when it was
// done, so that an answer given twice from two executions would differ.
type Row struct {
	Row int64 `json:"row"`
	At  int64 `json:"at"`
}

// Appended is the append tool's answer: where its line begins in the
// file.
type Appended struct {
	Offset int64 `json:"offset"`
	At     int64 `json:"at"`
}

// RunServer is the tool server role: kind (ServerHTTP or ServerMCP) on
// the database in dir, on a loopback port, said as "listening ADDR" on
// stdout; it serves until its stdin ends.
func RunServer(kind, dir string) int {
	ctx := context.Background()
	db, table, err := openTools(ctx, dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "tool server:", err)
		return 1
	}
	defer db.Close()
	t := &tools{table: table, lines: filepath.Join(dir, LinesFile)}
	var handler http.Handler
	if kind == ServerMCP {
		server := t.mcpServer()
		handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	} else {
		handler = t.httpServer()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "tool server:", err)
		return 1
	}
	go func() { _ = http.Serve(ln, handler) }()
	fmt.Printf("listening %s\n", ln.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// openTools opens the server's database, one connection, with the record
// of operations, the effects' table and the admissions' trigger.
func openTools(ctx context.Context, dir string) (*sql.DB, *ops.Table, error) {
	db, err := sql.Open("sqlite", DSN(dir))
	if err != nil {
		return nil, nil, err
	}
	db.SetMaxOpenConns(1)
	table, err := ops.New(db, ops.Options{Dialect: fence.SQLite})
	if err == nil {
		err = table.Create(ctx)
	}
	for _, ddl := range []string{
		`CREATE TABLE IF NOT EXISTS ` + EffectsTable + ` (seq INTEGER PRIMARY KEY AUTOINCREMENT,
			resource TEXT NOT NULL, epoch INTEGER NOT NULL, key TEXT NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS ` + AdmissionsTable + ` (seq INTEGER PRIMARY KEY AUTOINCREMENT,
			resource TEXT NOT NULL, epoch INTEGER NOT NULL, key TEXT NOT NULL)`,
		`CREATE TRIGGER IF NOT EXISTS tool_admitted AFTER INSERT ON ` + ops.DefaultTable + ` BEGIN
			INSERT INTO ` + AdmissionsTable + ` (resource, epoch, key) VALUES (NEW.resource, NEW.epoch, NEW.key); END`,
	} {
		if err == nil {
			_, err = db.ExecContext(ctx, ddl)
		}
	}
	if err != nil {
		_ = db.Close()
		return nil, nil, err
	}
	return db, table, nil
}

// tools are a server's two tools.
type tools struct {
	table *ops.Table
	lines string
	mu    sync.Mutex // one append at a time, for its offset
}

// row is the rows tool's effect, in the record's transaction.
func row(ctx context.Context, tx *sql.Tx, resource string, epoch int64, key string) (Row, error) {
	r, err := tx.ExecContext(ctx, `INSERT INTO `+EffectsTable+` (resource, epoch, key) VALUES (?, ?, ?)`, resource, epoch, key)
	if err != nil {
		return Row{}, err
	}
	id, err := r.LastInsertId()
	return Row{Row: id, At: time.Now().UnixNano()}, err
}

// appendLine is the append tool's effect: the line "resource epoch key".
func (t *tools) appendLine(resource string, epoch int64, key string) (Appended, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f, err := os.OpenFile(t.lines, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return Appended{}, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return Appended{}, err
	}
	_, err = fmt.Fprintf(f, "%s %d %s\n", resource, epoch, key)
	return Appended{Offset: info.Size(), At: time.Now().UnixNano()}, err
}

func (t *tools) httpServer() http.Handler {
	token := func(r *http.Request) (string, int64, string) {
		epoch, _ := strconv.ParseInt(r.Header.Get(httpfence.HeaderEpoch), 10, 64)
		return r.Header.Get(httpfence.HeaderResource), epoch, r.Header.Get(httpfence.HeaderKey)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /"+ToolRows, httpfence.Handler(t.table, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resource, epoch, key := token(r)
		out, err := row(r.Context(), httpfence.Tx(r), resource, epoch, key)
		reply(w, out, err)
	})))
	mux.Handle("POST /"+ToolAppend, httpfence.External(t.table, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		out, err := t.appendLine(token(r))
		reply(w, out, err)
	})))
	return mux
}

func reply(w http.ResponseWriter, out any, err error) {
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

func (t *tools) mcpServer() *mcp.Server {
	token := func(req *mcp.CallToolRequest) (string, int64, string) {
		m := req.Params.Meta
		resource, _ := m[mcpfence.MetaResource].(string)
		epoch, _ := m[mcpfence.MetaEpoch].(float64)
		key, _ := m[mcpfence.MetaKey].(string)
		return resource, int64(epoch), key
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "toolchaos"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: ToolRows}, mcpfence.Handler(t.table,
		func(ctx context.Context, tx *sql.Tx, req *mcp.CallToolRequest, _ Note) (*mcp.CallToolResult, Row, error) {
			resource, epoch, key := token(req)
			out, err := row(ctx, tx, resource, epoch, key)
			return nil, out, err
		}))
	mcp.AddTool(server, &mcp.Tool{Name: ToolAppend}, mcpfence.External(t.table,
		func(_ context.Context, req *mcp.CallToolRequest, _ Note) (*mcp.CallToolResult, Appended, error) {
			out, err := t.appendLine(token(req))
			return nil, out, err
		}))
	return server
}
