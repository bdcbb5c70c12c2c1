package worker

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
	"strconv"
	"strings"

	"leases/httpfence"
	"leases/ops"
)

// toolArg, as a worker's first argument, makes it the tool server: an
// HTTP tool behind package httpfence, whose record of operations and
// whose effects live in a SQLite file of the tool's own (the second
// argument), apart from the backend that grants the leases.
const toolArg = "-tool"

// ToolPath is the path the tool serves; ToolEffects is the table its
// effects are rows of, one per operation done: (resource, epoch, key,
// value), in the order they were done.
const (
	ToolPath    = "/effects"
	ToolEffects = "tool_effects"
)

// ToolDSN is how the tool, and a reader of its effects, open its file:
// immediate transactions and a busy timeout that bounds a hang, with one
// connection each.
func ToolDSN(path string) string {
	return "file:" + path + "?_txlock=immediate&_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)"
}

// StartTool starts the tool server, a process of this binary in the
// worker role, on the SQLite file at path, and waits, bounded by ctx,
// for it to announce the loopback address it listens on (Address). It
// exits when told to (Exit) or when its input ends.
func StartTool(ctx context.Context, name, path string, opts Options) (*Worker, error) {
	opts.Backend, opts.Address = toolArg, path
	w, err := start(ctx, name, opts)
	if err != nil {
		return nil, fmt.Errorf("start tool %s: %w", name, err)
	}
	return w, nil
}

// Address is the tool server's loopback address, host:port; "" for a
// worker.
func (w *Worker) Address() string { return w.address }

// serveTool is the tool server's process: it opens its file, listens on
// a loopback port, announces its pid and address, and serves until its
// input ends or says exit, or leave (then it answers once the server and
// its file are closed, and left is true).
func serveTool(path string, in *bufio.Reader, out io.Writer) (left bool, err error) {
	ctx := context.Background()
	enc := json.NewEncoder(out)
	db, table, err := openTool(ctx, path)
	if err != nil {
		_ = enc.Encode(failure(err))
		return false, err
	}
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = enc.Encode(failure(err))
		return false, errors.Join(err, db.Close())
	}
	server := &http.Server{Handler: toolHandler(table)}
	served := make(chan error, 1)
	go func() { served <- server.Serve(listener) }()
	end := ""
	if err = enc.Encode(reply{PID: os.Getpid(), Address: listener.Addr().String()}); err != nil {
		err = fmt.Errorf("announcing its address: %w", err)
	} else {
		end, err = toolOrders(in)
	}
	err = errors.Join(err, server.Shutdown(ctx))
	if serveErr := <-served; !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, serveErr)
	}
	err = errors.Join(err, db.Close())
	if end == "" {
		return false, err
	}
	if err == nil {
		err = enc.Encode(reply{})
	}
	return err == nil && end == opLeave, err
}

// toolOrders reads the tool server's input until it says exit or leave,
// which it returns, or ends ("").
func toolOrders(in *bufio.Reader) (string, error) {
	for {
		req, err := readRequest(in)
		if err == io.EOF {
			return "", nil
		}
		if err != nil {
			return "", err
		}
		if req.Op == opExit || req.Op == opLeave {
			return req.Op, nil
		}
	}
}

// openTool opens the tool's file with one connection and creates the
// record of operations and the effects' table.
func openTool(ctx context.Context, path string) (*sql.DB, *ops.Table, error) {
	db, err := sql.Open("sqlite", ToolDSN(path))
	if err != nil {
		return nil, nil, err
	}
	db.SetMaxOpenConns(1)
	table, err := ops.New(db, ops.Options{})
	if err == nil {
		err = table.Create(ctx)
	}
	if err == nil {
		_, err = db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS "+ToolEffects+
			" (resource TEXT NOT NULL, epoch INTEGER NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL)")
	}
	if err != nil {
		return nil, nil, errors.Join(fmt.Errorf("open the tool's database: %w", err), db.Close())
	}
	return db, table, nil
}

// toolHandler is the tool: a POST of a value to ToolPath is one effect,
// a row of ToolEffects written in the record's transaction.
func toolHandler(table *ops.Table) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST "+ToolPath, httpfence.Handler(table, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		value, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		epoch := r.Header.Get(httpfence.HeaderEpoch)
		_, err = httpfence.Tx(r).ExecContext(r.Context(), "INSERT INTO "+ToolEffects+" (resource, epoch, key, value) VALUES (?, ?, ?, ?)",
			r.Header.Get(httpfence.HeaderResource), epoch, r.Header.Get(httpfence.HeaderKey), string(value))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "done: %q at epoch %s\n", value, epoch)
	})))
	return mux
}

// ToolAnswer is the tool's answer to one call, as the agent got it.
type ToolAnswer struct {
	Status   int    `json:"status"`
	Replayed bool   `json:"replayed,omitempty"` // Idempotent-Replayed: true
	Newest   int64  `json:"newest,omitempty"`   // Leases-Newest-Epoch, on a stale call
	Body     string `json:"body"`
}

// ErrAnswerLost is a tool call that got no answer: the connection ended
// before the response came. Whether the tool did the operation is
// unknown to the agent; the same call again tells.
var ErrAnswerLost = errors.New("the tool's answer was lost")

// CallTool asks the worker to call the tool at address with the lease
// (resource, epoch) and the operation key, value as the request's body.
// A call whose answer never came is ErrAnswerLost.
func (w *Worker) CallTool(ctx context.Context, address, resource string, epoch int64, key, value string) (ToolAnswer, error) {
	got, err := w.call(ctx, request{Op: opCallTool, URL: "http://" + address + ToolPath, Resource: resource, Epoch: epoch, Key: key, Value: value})
	switch {
	case err != nil:
		return ToolAnswer{}, err
	case got.Lost != "":
		return ToolAnswer{}, fmt.Errorf("worker %s: %w: %s", w.name, ErrAnswerLost, got.Lost)
	case got.Tool == nil:
		return ToolAnswer{}, fmt.Errorf("worker %s sent no tool answer", w.name)
	}
	return *got.Tool, nil
}

// callTool is the agent's side of a tool call: one POST on a connection
// of its own (the transport's retries of a reused connection are not
// this agent's), with the lease's headers.
func callTool(ctx context.Context, req request) reply {
	call, err := http.NewRequestWithContext(ctx, http.MethodPost, req.URL, strings.NewReader(req.Value))
	if err != nil {
		return failure(err)
	}
	call.Header.Set(httpfence.HeaderResource, req.Resource)
	call.Header.Set(httpfence.HeaderEpoch, strconv.FormatInt(req.Epoch, 10))
	call.Header.Set(httpfence.HeaderKey, req.Key)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(call)
	if err != nil {
		return reply{Lost: err.Error()}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{Lost: err.Error()}
	}
	answer := ToolAnswer{Status: resp.StatusCode, Replayed: resp.Header.Get(httpfence.HeaderReplayed) == "true", Body: string(body)}
	if newest := resp.Header.Get(httpfence.HeaderNewest); newest != "" {
		if answer.Newest, err = strconv.ParseInt(newest, 10, 64); err != nil {
			return failure(fmt.Errorf("the tool's %s %q: %w", httpfence.HeaderNewest, newest, err))
		}
	}
	return reply{Tool: &answer}
}
