package scenario

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"leases"
	"leases/evidence/worker"
)

// OpStartTool starts the tool server's process.
const OpStartTool = "start-tool"

// toolServer is a scenario's tool server: its process, the controller's
// proxy in front of it (which can drop an answer), and the controller's
// own connection to its database, which reads the effects after every
// call.
type toolServer struct {
	w     *worker.Worker
	proxy *answerDropper
	db    *sql.DB
	dir   string
}

// startWithTool launches the workers called names and the tool server
// at once (a process's start is tens of milliseconds of CPU, and one
// after the other they were most of a tool scenario's time), and
// returns once all have announced themselves. The tool serves on a
// SQLite file of its own, in a temporary directory of the scenario's,
// behind the proxy the agents call it through. Should any fail, the
// script keeps the tool's error, else the first worker's.
func (r *script) startWithTool(names ...string) []*actor {
	actors := make([]*actor, len(names))
	for i, name := range names {
		actors[i] = &actor{name: name}
	}
	if r.err != nil {
		return actors
	}
	errs := make([]error, len(names)+1)
	var wg sync.WaitGroup
	wg.Go(func() { r.tool, errs[0] = r.launchTool() })
	for i, a := range actors {
		wg.Go(func() { a.w, errs[i+1] = r.launch(a.name) })
	}
	wg.Wait()
	if r.tool != nil && r.tool.w != nil {
		r.workers = append(r.workers, r.tool.w)
	}
	for _, a := range actors {
		if a.w != nil {
			r.workers = append(r.workers, a.w)
		}
	}
	step := Step{Actor: ToolActor, Operation: OpStartTool, Tick: r.clock, Outcome: OutcomeServing}
	if err := errors.Join(errs...); err != nil {
		r.fail(step, err)
		return actors
	}
	r.record(step)
	return actors
}

func (r *script) launchTool() (*toolServer, error) {
	dir, err := os.MkdirTemp("", "leases-tool-"+r.def.Name+"-")
	if err != nil {
		return nil, err
	}
	t := &toolServer{dir: dir}
	path := filepath.Join(dir, "tool.db")
	startTool := worker.StartTool
	if r.opts.Workers != nil {
		startTool = r.opts.Workers.StartTool
	}
	t.w, err = startTool(r.ctx, ToolActor, path, worker.Options{Started: r.started(ToolActor)})
	if err != nil {
		return t, err
	}
	if t.db, err = sql.Open("sqlite", worker.ToolDSN(path)); err != nil {
		return t, err
	}
	t.db.SetMaxOpenConns(1)
	t.proxy, err = newAnswerDropper(t.w.Address())
	return t, err
}

// close ends the tool server, its proxy and the controller's connection,
// and removes the tool's directory.
func (t *toolServer) close(ctx context.Context) error {
	var err error
	if t.proxy != nil {
		err = t.proxy.close()
	}
	if t.db != nil {
		err = errors.Join(err, t.db.Close())
	}
	if t.w != nil {
		err = errors.Join(err, t.w.Exit(ctx))
	}
	return errors.Join(err, os.RemoveAll(t.dir))
}

// effects reads the tool's effects, in the order they were done.
func (t *toolServer) effects(ctx context.Context) ([]ToolEffect, error) {
	rows, err := t.db.QueryContext(ctx, "SELECT epoch, key, value FROM "+worker.ToolEffects+" ORDER BY rowid")
	if err != nil {
		return nil, fmt.Errorf("reading the tool's effects: %w", err)
	}
	defer rows.Close()
	all := []ToolEffect{}
	for rows.Next() {
		var e ToolEffect
		if err := rows.Scan(&e.Epoch, &e.Key, &e.Value); err != nil {
			return nil, err
		}
		all = append(all, e)
	}
	return all, rows.Err()
}

// callTool asks a to call the tool with the epoch of the lease it was
// last granted, live or not (a paused agent does not know), under key.
func (r *script) callTool(a *actor, key, value string) {
	r.toolCall(a, key, value, false)
}

// callToolAnswerLost is callTool whose answer the proxy drops once the
// tool has answered (and so has committed): the agent gets none.
func (r *script) callToolAnswerLost(a *actor, key, value string) {
	r.toolCall(a, key, value, true)
}

func (r *script) toolCall(a *actor, key, value string, lose bool) {
	if r.err != nil {
		return
	}
	epoch := r.leaseOf[a.name].Epoch
	step := Step{Actor: a.name, Operation: OpCallTool, Tick: r.clock, Epoch: epoch, Key: key, Value: value}
	if r.tool == nil || r.tool.proxy == nil {
		r.fail(step, errors.New("no tool server started"))
		return
	}
	r.tool.proxy.drop.Store(lose)
	answer, err := a.w.CallTool(r.ctx, r.tool.proxy.address(), r.def.Params.Resource, epoch, key, value)
	switch {
	case lose && errors.Is(err, worker.ErrAnswerLost):
		step.Outcome, step.Detail = OutcomeLost, "the connection closed before the answer"
	case err != nil:
		r.fail(step, err)
		return
	case lose:
		r.fail(step, fmt.Errorf("the answer was to be lost, and came: %d", answer.Status))
		return
	default:
		step.Status, step.NewestEpoch, step.Outcome = answer.Status, answer.Newest, toolOutcome(answer)
		if step.Outcome != string(leases.Accepted) && step.Outcome != string(leases.Replay) {
			step.Detail = trimLine(answer.Body)
		}
	}
	if step.ToolEffectsAfter, err = r.tool.effects(r.ctx); err != nil {
		r.fail(step, err)
		return
	}
	r.record(step)
}

// toolOutcome is the record's outcome as the tool's HTTP answer says it
// (package httpfence's answers).
func toolOutcome(a worker.ToolAnswer) string {
	switch {
	case a.Replayed:
		return string(leases.Replay)
	case a.Status < 300:
		return string(leases.Accepted)
	case a.Status == http.StatusConflict && a.Newest > 0:
		return string(leases.Stale)
	case a.Status == http.StatusConflict:
		return string(leases.InProgress)
	case a.Status == http.StatusUnprocessableEntity:
		return string(leases.Conflict)
	}
	return fmt.Sprintf("http-%d", a.Status)
}

func trimLine(s string) string {
	if n := len(s); n > 0 && s[n-1] == '\n' {
		return s[:n-1]
	}
	return s
}

// resumeBare continues a's process with SIGCONT. a holds no session:
// nothing tells it that its lease has run out.
func (r *script) resumeBare(a *actor) {
	if r.err != nil {
		return
	}
	step := Step{Actor: a.name, Operation: OpResume, Tick: r.clock, Outcome: OutcomeContinued}
	if err := a.w.Continue(); err != nil {
		r.fail(step, err)
		return
	}
	r.record(step)
}

// answerDropper is the controller's HTTP proxy between the agents and the
// tool: it forwards every call, and when drop is set it reads the tool's
// whole answer, so the tool has committed, and then closes the agent's
// connection without it, as a network that fails after the server has
// answered does.
type answerDropper struct {
	target   string
	drop     atomic.Bool
	listener net.Listener
	server   *http.Server
	client   *http.Client
	served   chan error
}

func newAnswerDropper(target string) (*answerDropper, error) {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &answerDropper{target: target, listener: listener, served: make(chan error, 1),
		client: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}}
	p.server = &http.Server{Handler: p}
	go func() { p.served <- p.server.Serve(listener) }()
	return p, nil
}

func (p *answerDropper) address() string { return p.listener.Addr().String() }

func (p *answerDropper) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	out, err := http.NewRequestWithContext(r.Context(), r.Method, "http://"+p.target+r.URL.RequestURI(), r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out.Header, out.ContentLength = r.Header.Clone(), r.ContentLength
	resp, err := p.client.Do(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	if p.drop.Swap(false) {
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			_ = conn.Close()
		}
		return
	}
	for name, values := range resp.Header {
		w.Header()[name] = values
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(body)
}

func (p *answerDropper) close() error {
	err := p.server.Close()
	if served := <-p.served; !errors.Is(served, http.ErrServerClosed) {
		err = errors.Join(err, served)
	}
	return err
}

// endTool reads the tool's effects one last time, unless the script has
// failed, and ends the tool server; none when the scenario has no tool.
func (r *script) endTool() ([]ToolEffect, error) {
	if r.tool == nil {
		return nil, nil
	}
	var effects []ToolEffect
	var err error
	if r.err == nil && r.tool.db != nil {
		effects, err = r.tool.effects(r.ctx)
	}
	return effects, errors.Join(err, r.tool.close(r.ctx))
}
