package toolchaos_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"leases"
	"leases/ops"
	"leases/testkit/childtest"
	"leases/tests/history"
	"leases/tests/toolchaos"
)

// config is one run's shape.
type config struct {
	Agents       int
	Resources    []string
	TTL          time.Duration
	OpsPerTenure int
	Run          time.Duration // how long the faults go on
	Seed         uint64
	// The chances of a fault: a call stopped as it is about to go out
	// (Late), an answer cut (Cut), and, at each of the controller's
	// turns, which fault it makes.
	Late, Cut float64
}

// counts are the faults the controller made.
type counts struct {
	Late, Paused, Killed, Restarted int
}

type agentProc struct {
	holder   string
	child    *childtest.Child
	out      bytes.Buffer             // its records, as it wrote them
	calls    map[int64]history.Record // its calls, by id, for their returns
	killedAt int64                    // when the controller killed it, or 0
	stopped  bool                     // SIGSTOPped by a fault that has not ended
	read     chan struct{}            // closed when its output ended
}

type server struct {
	kind, dir string
	child     *childtest.Child
	proxy     *proxy
}

type controller struct {
	t       *testing.T
	cfg     config
	dir     string
	lessor  string
	servers map[string]*server

	mu       sync.Mutex
	rng      *rand.Rand
	agents   []*agentProc
	admitted map[[2]string]int64 // by server and resource: the newest epoch an answer showed admitted
	changed  chan struct{}       // closed and renewed when admitted changes, or the run ends
	ending   bool
	counts   counts
}

func newController(t *testing.T, cfg config) *controller {
	dir := t.TempDir()
	c := &controller{t: t, cfg: cfg, dir: dir, lessor: filepath.Join(dir, "leases.db"), servers: map[string]*server{},
		rng: rand.New(rand.NewPCG(cfg.Seed, 2)), admitted: map[[2]string]int64{}, changed: make(chan struct{})}
	// A tool call: every HTTP request (one per connection), and an MCP
	// POST of tools/call. Answered: an HTTP answer's first bytes (written
	// after the commit), and MCP's JSON-RPC result.
	calls := map[string]func([]byte) bool{
		toolchaos.ServerHTTP: func([]byte) bool { return true },
		toolchaos.ServerMCP:  func(b []byte) bool { return bytes.Contains(b, []byte(`"tools/call"`)) },
	}
	answered := map[string]func([]byte) bool{
		toolchaos.ServerHTTP: func(b []byte) bool { return len(b) > 0 },
		toolchaos.ServerMCP:  func(b []byte) bool { return bytes.Contains(b, []byte(`"result"`)) },
	}
	for _, kind := range []string{toolchaos.ServerHTTP, toolchaos.ServerMCP} {
		s := &server{kind: kind, dir: filepath.Join(dir, kind)}
		if err := os.Mkdir(s.dir, 0o755); err != nil {
			t.Fatal(err)
		}
		s.proxy = startProxy(t, calls[kind], answered[kind], func() bool { return c.chance(cfg.Cut) })
		c.servers[kind] = s
		c.startServer(s)
	}
	return c
}

func (c *controller) chance(p float64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rng.Float64() < p
}

func (c *controller) interval(lo, hi time.Duration) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return lo + time.Duration(c.rng.Int64N(int64(hi-lo)+1))
}

// startServer starts s's process and points its proxy at it once it
// listens.
func (c *controller) startServer(s *server) {
	s.child = childtest.Start(c.t, serverRole, s.kind, s.dir)
	if !s.child.Lines.Scan() {
		c.t.Fatalf("the %s tool server did not start: %v", s.kind, s.child.Wait())
	}
	addr, ok := strings.CutPrefix(s.child.Lines.Text(), "listening ")
	if !ok {
		c.t.Fatalf("the %s tool server said %q", s.kind, s.child.Lines.Text())
	}
	s.proxy.upstream.Store(&addr)
}

// startAgent starts a new agent, a new holder.
func (c *controller) startAgent(ctx context.Context) {
	c.mu.Lock()
	n := len(c.agents) + 1
	c.mu.Unlock()
	cfg := toolchaos.AgentConfig{Holder: fmt.Sprintf("agent-%d", n), Lessor: c.lessor, Resources: c.cfg.Resources,
		TTL: c.cfg.TTL, HTTP: c.servers[toolchaos.ServerHTTP].proxy.addr(), MCP: c.servers[toolchaos.ServerMCP].proxy.addr(),
		OpsPerTenure: c.cfg.OpsPerTenure, Seed: c.cfg.Seed + uint64(n)}
	config, err := json.Marshal(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	p := &agentProc{holder: cfg.Holder, calls: map[int64]history.Record{}, read: make(chan struct{})}
	p.child = childtest.Start(c.t, agentRole, string(config))
	c.mu.Lock()
	c.agents = append(c.agents, p)
	c.mu.Unlock()
	go c.read(ctx, p)
}

// read keeps an agent's records, follows what its answers show admitted,
// and answers its points.
func (c *controller) read(ctx context.Context, p *agentProc) {
	defer close(p.read)
	for p.child.Lines.Scan() {
		line := p.child.Lines.Bytes()
		var r history.Record
		err := json.Unmarshal(line, &r)
		c.mu.Lock()
		p.out.Write(line)
		p.out.WriteByte('\n')
		if err == nil {
			c.follow(p, r)
		}
		c.mu.Unlock()
		if err == nil && r.Kind == "at" {
			go c.at(ctx, p, r)
		}
	}
}

// follow notes, under c.mu, the newest epoch each answer shows a server
// admitted.
func (c *controller) follow(p *agentProc, r history.Record) {
	switch r.Kind {
	case "call":
		p.calls[r.ID] = r
	case "ret":
		call := p.calls[r.ID]
		delete(p.calls, r.ID)
		if call.Op != "tool" || r.Result != history.ResultOK || r.Outcome == leases.Stale {
			return
		}
		where := [2]string{call.Value, call.Resource}
		if call.Epoch > c.admitted[where] {
			c.admitted[where] = call.Epoch
			close(c.changed)
			c.changed = make(chan struct{})
		}
	}
}

// at answers an agent about to send a call: at once, or, by chance,
// after stopping it until an answer showed the server admitted a newer
// epoch (the next holder's call), so that its call arrives stale; a
// bound of a few time-to-lives ends the wait when no newer holder came.
func (c *controller) at(ctx context.Context, p *agentProc, r history.Record) {
	if c.chance(c.cfg.Late) && c.signal(p, syscall.SIGSTOP, true) {
		c.mu.Lock()
		c.counts.Late++
		c.mu.Unlock()
		bound := time.NewTimer(4 * c.cfg.TTL)
		defer bound.Stop()
		for {
			c.mu.Lock()
			newer, ending, changed := c.admitted[[2]string{r.Value, r.Resource}] > r.Epoch, c.ending, c.changed
			c.mu.Unlock()
			if newer || ending {
				break
			}
			select {
			case <-changed:
				continue
			case <-bound.C:
			case <-ctx.Done():
			}
			break
		}
		c.signal(p, syscall.SIGCONT, false)
	}
	_, _ = fmt.Fprintln(p.child.In, "go")
}

// signal sends sig to p unless it was killed; stopping, it says whether
// p was running (a stopped agent is not stopped twice).
func (c *controller) signal(p *agentProc, sig syscall.Signal, stop bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p.killedAt != 0 || stop && p.stopped {
		return false
	}
	p.stopped = stop
	return syscall.Kill(p.child.Pid(), sig) == nil
}

// faults makes a fault at random intervals until the run's end: an agent
// stopped for up to a few time-to-lives, an agent killed (and a new one
// started), or a tool server killed and restarted.
func (c *controller) faults(ctx context.Context) {
	end := time.NewTimer(c.cfg.Run)
	defer end.Stop()
	var resumes sync.WaitGroup
	defer resumes.Wait()
	for {
		next := time.NewTimer(c.interval(c.cfg.TTL/4, c.cfg.TTL))
		select {
		case <-end.C:
			next.Stop()
			return
		case <-ctx.Done():
			next.Stop()
			return
		case <-next.C:
		}
		c.mu.Lock()
		p := c.agents[len(c.agents)-1-c.rng.IntN(c.cfg.Agents)] // the live ones are the last
		kind := c.rng.IntN(10)
		c.mu.Unlock()
		switch {
		case kind < 5:
			if c.signal(p, syscall.SIGSTOP, true) {
				c.mu.Lock()
				c.counts.Paused++
				c.mu.Unlock()
				length := c.interval(c.cfg.TTL/4, 2*c.cfg.TTL)
				resumes.Go(func() {
					select {
					case <-time.After(length):
					case <-ctx.Done():
					}
					c.signal(p, syscall.SIGCONT, false)
				})
			}
		case kind < 8:
			c.kill(ctx, p)
		default:
			c.restart([]string{toolchaos.ServerHTTP, toolchaos.ServerMCP}[kind%2])
		}
	}
}

// kill kills p, notes when, and starts a new agent in its place.
func (c *controller) kill(ctx context.Context, p *agentProc) {
	c.mu.Lock()
	if p.killedAt != 0 {
		c.mu.Unlock()
		return
	}
	_ = p.child.Cmd.Process.Kill()
	p.killedAt = time.Now().UnixNano()
	c.counts.Killed++
	// The live agents are the last: the killed one goes first, the new
	// one last.
	for i, q := range c.agents {
		if q == p {
			c.agents = append(append([]*agentProc{p}, c.agents[:i]...), c.agents[i+1:]...)
			break
		}
	}
	c.mu.Unlock()
	_ = p.child.Wait()
	c.startAgent(ctx)
}

// restart kills the tool server kind, with its database, and starts it
// again on the same directory.
func (c *controller) restart(kind string) {
	s := c.servers[kind]
	s.child.Kill()
	c.startServer(s)
	c.mu.Lock()
	c.counts.Restarted++
	c.mu.Unlock()
}

// stop ends the run: every agent continued and told to end (its stdin
// closes), waited for, then the servers.
func (c *controller) stop(ctx context.Context) {
	c.mu.Lock()
	c.ending = true
	close(c.changed)
	c.changed = make(chan struct{})
	agents := append([]*agentProc(nil), c.agents...)
	c.mu.Unlock()
	for _, p := range agents {
		c.signal(p, syscall.SIGCONT, false)
		_ = p.child.In.Close()
	}
	for _, p := range agents {
		exited := make(chan error, 1)
		go func() { exited <- p.child.Wait() }()
		select {
		case err := <-exited:
			if err != nil && p.killedAt == 0 {
				c.t.Errorf("%s exited: %v", p.holder, err)
			}
		case <-ctx.Done():
			c.t.Fatalf("%s did not end by the test's deadline", p.holder)
		}
		<-p.read
	}
	for _, s := range c.servers {
		_ = s.child.In.Close()
		if err := s.child.Wait(); err != nil {
			c.t.Errorf("the %s tool server exited: %v", s.kind, err)
		}
	}
}

// keepEnv names a directory where the agents' records are kept, one
// file each, for a failed run to be read.
const keepEnv = "LEASES_TOOLCHAOS_KEEP"

// history is the agents' records with what the lease file and the tool
// servers hold.
func (c *controller) history(ctx context.Context) *history.History {
	h := &history.History{Epochs: map[string]int64{}, Fences: map[string]int64{}, Counters: map[string]int64{}}
	tools := map[string]string{} // by operation key
	for _, p := range c.agents {
		if dir := os.Getenv(keepEnv); dir != "" {
			if err := os.WriteFile(filepath.Join(dir, p.holder+".jsonl"), p.out.Bytes(), 0o644); err != nil {
				c.t.Error(err)
			}
		}
		if err := h.Read(p.holder, &p.out); err != nil {
			c.t.Fatal(err)
		}
		if p.killedAt != 0 {
			if err := h.Add(p.holder, history.Record{Kind: "killed", T: p.killedAt}); err != nil {
				c.t.Fatal(err)
			}
		}
	}
	for _, o := range h.Ops {
		if o.Call.Op == "tool" {
			tools[o.Call.OpID] = o.Call.Tool
		}
	}
	lessor := c.open(c.lessor)
	defer lessor.Close()
	c.query(ctx, lessor, `SELECT resource, epoch FROM authority_leases`, func(rows *sql.Rows) error {
		var r string
		var e int64
		err := rows.Scan(&r, &e)
		h.Epochs[r] = e
		return err
	})
	h.Tools = &history.ToolState{Records: map[history.ToolKey]history.ToolRecord{}, External: map[string]bool{toolchaos.ToolAppend: true}}
	for kind, s := range c.servers {
		c.readServer(ctx, h.Tools, kind, s.dir, tools)
	}
	return h
}

func (c *controller) open(path string) *sql.DB {
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		c.t.Fatal(err)
	}
	return db
}

func (c *controller) query(ctx context.Context, db *sql.DB, query string, scan func(*sql.Rows) error) {
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		c.t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			c.t.Fatal(err)
		}
	}
	if err := rows.Err(); err != nil {
		c.t.Fatal(err)
	}
}

// readServer reads a tool server's records, effects and admissions.
func (c *controller) readServer(ctx context.Context, into *history.ToolState, kind, dir string, tools map[string]string) {
	db := c.open(filepath.Join(dir, "tools.db"))
	defer db.Close()
	c.query(ctx, db, `SELECT resource, epoch, key, state, body FROM `+ops.DefaultTable, func(rows *sql.Rows) error {
		k := history.ToolKey{Server: kind}
		var state string
		var body []byte
		if err := rows.Scan(&k.Resource, &k.Epoch, &k.Key, &state, &body); err != nil {
			return err
		}
		into.Records[k] = history.ToolRecord{State: state, Tool: tools[k.Key], Body: shown(kind, body)}
		return nil
	})
	c.query(ctx, db, `SELECT seq, resource, epoch, key FROM `+toolchaos.EffectsTable+` ORDER BY seq`, func(rows *sql.Rows) error {
		e := history.ToolEffect{ToolKey: history.ToolKey{Server: kind}, Tool: toolchaos.ToolRows}
		err := rows.Scan(&e.Seq, &e.Resource, &e.Epoch, &e.Key)
		into.Effects = append(into.Effects, e)
		return err
	})
	c.query(ctx, db, `SELECT seq, resource, epoch, key FROM `+toolchaos.AdmissionsTable+` ORDER BY seq`, func(rows *sql.Rows) error {
		a := history.ToolAdmission{ToolKey: history.ToolKey{Server: kind}}
		err := rows.Scan(&a.Seq, &a.Resource, &a.Epoch, &a.Key)
		into.Admissions = append(into.Admissions, a)
		return err
	})
	lines, err := os.ReadFile(filepath.Join(dir, toolchaos.LinesFile))
	if err != nil && !os.IsNotExist(err) {
		c.t.Fatal(err)
	}
	for i, line := range bytes.Split(bytes.TrimSuffix(lines, []byte("\n")), []byte("\n")) {
		if len(line) == 0 {
			continue // no lines
		}
		f := strings.Fields(string(line))
		epoch, err := strconv.ParseInt(f[min(1, len(f)-1)], 10, 64)
		if len(f) != 3 || err != nil {
			c.t.Fatalf("%s line %d: %q", toolchaos.LinesFile, i+1, line)
		}
		into.Effects = append(into.Effects, history.ToolEffect{ToolKey: history.ToolKey{Server: kind, Resource: f[0], Epoch: epoch, Key: f[2]},
			Tool: toolchaos.ToolAppend, Seq: int64(i + 1)})
	}
}

// shown is a stored answer as the agent is shown it: an HTTP body, or an
// MCP result's text.
func shown(kind string, body []byte) string {
	if kind == toolchaos.ServerHTTP {
		return string(body)
	}
	var res mcp.CallToolResult
	if json.Unmarshal(body, &res) != nil {
		return "unreadable: " + string(body)
	}
	for _, c := range res.Content {
		if text, ok := c.(*mcp.TextContent); ok {
			return text.Text
		}
	}
	return ""
}
