package mcpfence_test

import (
	"context"
	"database/sql"
	"strconv"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"leases/mcpfence"
	"leases/session"
	"leases/testkit/sqlitetest"
)

// An MCP call (in-memory transport) of a tool that inserts one row:
// through both wrappers (mcpfence.Client attaching the session's token
// and a key, mcpfence.Handler admitting the epoch and recording the
// answer in the row's transaction), against a bare call of a bare tool
// inserting the same row in a transaction of its own. Each iteration
// makes one call of each, alternately, so that a machine shared with
// others slows both alike; bare-ns/call, fenced-ns/call and their ratio
// are reported. On a file synced at each commit (SQLite's default), and
// on one never synced, where the wrappers' own work shows.
func BenchmarkCall(b *testing.B) {
	for _, bench := range []struct{ name, pragmas string }{
		{"synced", ""},
		{"unsynced", "&_pragma=synchronous(OFF)"},
	} {
		b.Run(bench.name, func(b *testing.B) {
			ctx := context.Background()
			ts := newToolServerOn(b, bench.pragmas)
			server := ts.server()
			mcp.AddTool(server, &mcp.Tool{Name: "add_note_bare"}, bareAddNote(ts.db))
			cs := connect(b, server)
			s, err := session.Start(ctx, sqlitetest.Open(b, sqlitetest.Path(b)).Lessor(), "r", "A", session.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close(ctx)
			client := mcpfence.NewClient(cs, s)
			var bare, fenced time.Duration
			i := 0
			for b.Loop() {
				i++
				start := time.Now()
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "add_note_bare", Arguments: Note{Text: "x"}})
				if err != nil || res.IsError {
					b.Fatal(err, text(res))
				}
				bare += time.Since(start)
				start = time.Now()
				res, err = client.CallTool(mcpfence.WithKey(ctx, strconv.Itoa(i)), &mcp.CallToolParams{Name: "add_note", Arguments: Note{Text: "x"}})
				if err != nil || res.IsError {
					b.Fatal(err, text(res))
				}
				fenced += time.Since(start)
			}
			b.ReportMetric(float64(bare.Nanoseconds())/float64(i), "bare-ns/call")
			b.ReportMetric(float64(fenced.Nanoseconds())/float64(i), "fenced-ns/call")
			b.ReportMetric(float64(fenced)/float64(bare), "fenced/bare")
		})
	}
}

// bareAddNote is add_note without the wrapper: the same row, in a
// transaction of its own.
func bareAddNote(db *sql.DB) mcp.ToolHandlerFor[Note, Added] {
	return func(ctx context.Context, _ *mcp.CallToolRequest, in Note) (*mcp.CallToolResult, Added, error) {
		var out Added
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return nil, out, err
		}
		defer tx.Rollback()
		if out, err = insertNote(ctx, tx, in); err == nil {
			err = tx.Commit()
		}
		return nil, out, err
	}
}

// insertNote is add_note's effect: one row.
func insertNote(ctx context.Context, tx *sql.Tx, in Note) (Added, error) {
	r, err := tx.ExecContext(ctx, `INSERT INTO notes (text) VALUES (?)`, in.Text)
	if err != nil {
		return Added{}, err
	}
	id, err := r.LastInsertId()
	return Added{ID: id}, err
}
