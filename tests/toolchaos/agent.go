package toolchaos

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"leases"
	"leases/clock"
	"leases/httpfence"
	"leases/mcpfence"
	"leases/session"
	"leases/sqlite"
	"leases/tests/history"
)

// AgentConfig is what an agent process is told when it starts.
type AgentConfig struct {
	// Holder is the agent's name: one per process.
	Holder string `json:"holder"`
	// Lessor is the SQLite file of the leases.
	Lessor    string        `json:"lessor"`
	Resources []string      `json:"resources"`
	TTL       time.Duration `json:"ttl"`
	// HTTP and MCP are the addresses (host:port) of the tool servers, as
	// the agents reach them: through the test's proxies.
	HTTP string `json:"http"`
	MCP  string `json:"mcp"`
	// OpsPerTenure is how many operations an agent does in a tenure.
	OpsPerTenure int    `json:"ops_per_tenure"`
	Seed         uint64 `json:"seed"`
}

// PointSend is the point, announced as an "at" record, where an agent
// has checked its session and is about to send a tool call: the
// controller may stop it there, for the call to go out late.
const PointSend = "send"

// retries bounds the calls of one operation: after them (each answered
// in progress, or lost) the agent leaves the operation to the record.
const retries = 6

type agent struct {
	cfg       AgentConfig
	rng       *rand.Rand
	rec       *history.Recorder
	answers   <-chan string
	web       *http.Client // no keep-alive: one connection per call, for the proxy to cut
	cs        *mcp.ClientSession
	current   history.Record // the call being made: the agent makes one at a time
	currentID int64
}

// RunAgent is the agent role: it reads its AgentConfig from the JSON
// config, and does operations on the tool servers under leases until
// its stdin ends. It returns the process's exit code.
func RunAgent(config string) int {
	var cfg AgentConfig
	if err := json.Unmarshal([]byte(config), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "agent: bad configuration:", err)
		return 2
	}
	answers := make(chan string)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		defer cancel()
		defer close(answers)
		for lines := bufio.NewScanner(os.Stdin); lines.Scan(); {
			answers <- lines.Text()
		}
	}()
	enc := json.NewEncoder(os.Stdout)
	a := &agent{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 1)), answers: answers,
		rec: history.NewRecorder(func() (int64, int64) { return time.Now().UnixNano(), clock.Wall{}.Now() },
			func(r history.Record) { _ = enc.Encode(r) })}
	a.web = &http.Client{Transport: &pointTransport{a: a, base: &http.Transport{DisableKeepAlives: true}}}
	store, err := openLessor(ctx, cfg)
	if ctx.Err() != nil {
		return 0 // told to end before it began
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		return 1
	}
	defer store.Close()
	lessor := clock.Lessor(history.Authority(store.Authority(), a.rec), clock.Wall{})
	for ctx.Err() == nil {
		a.tenure(ctx, lessor, cfg.Resources[a.rng.IntN(len(cfg.Resources))])
	}
	if a.cs != nil {
		_ = a.cs.Close()
	}
	return 0
}

// openLessor opens the lease file, again after a backoff while it is
// locked (by an agent stopped in a transaction), until ctx ends.
func openLessor(ctx context.Context, cfg AgentConfig) (*sqlite.Store, error) {
	for {
		store, err := sqlite.Open(ctx, cfg.Lessor)
		if err == nil || ctx.Err() != nil {
			return store, err
		}
		if (clock.Wall{}).Wait(ctx, clock.Wall{}.Now()+cfg.TTL.Milliseconds()/4) != nil {
			return nil, err
		}
	}
}

// tenure waits for the lease on resource and does its operations: each
// until answered, refused stale, or left to the record.
func (a *agent) tenure(ctx context.Context, lessor leases.Lessor, resource string) {
	s, err := session.Wait(ctx, lessor, resource, a.cfg.Holder, session.Options{TTL: a.cfg.TTL})
	if err != nil {
		_ = clock.Wall{}.Wait(ctx, clock.Wall{}.Now()+a.cfg.TTL.Milliseconds()/4) // a backoff
		return
	}
	defer func() { _ = s.Close(context.WithoutCancel(ctx)) }()
	for i := range a.cfg.OpsPerTenure {
		server, tool := ServerHTTP, ToolRows
		if a.rng.IntN(2) == 0 {
			server = ServerMCP
		}
		if a.rng.IntN(2) == 0 {
			tool = ToolAppend
		}
		key := fmt.Sprintf("%s-%d-%d", a.cfg.Holder, s.Epoch(), i)
		if !a.operate(ctx, s, server, tool, key) {
			return
		}
	}
}

// operate calls the tool until the record answers, or the lease is
// lost; it says whether the tenure goes on.
func (a *agent) operate(ctx context.Context, s *session.Session, server, tool, key string) bool {
	for range retries {
		call := history.Record{Op: "tool", Resource: s.Lease().Resource, Holder: a.cfg.Holder, Epoch: s.Epoch(),
			OpID: key, Value: server, Tool: tool}
		id := a.rec.Call(call)
		a.current, a.currentID = call, id
		var ret history.Record
		if server == ServerMCP {
			ret = a.callMCP(ctx, s, tool, key)
		} else {
			ret = a.callHTTP(ctx, tool, key, httpfence.Transport(s, a.web.Transport))
		}
		a.rec.Return(id, ret)
		switch {
		case ret.Result == history.ResultOK && (ret.Outcome == leases.Accepted || ret.Outcome == leases.Replay):
			return true
		case ret.Result == history.ResultOK && ret.Outcome == leases.Stale, ret.Result == history.ResultEnded, ctx.Err() != nil:
			return false
		}
		// Lost, in progress, or failed: the same call again, after a
		// backoff, while the session lasts.
		if (clock.Wall{}).Wait(s.Context(), clock.Wall{}.Now()+10+a.rng.Int64N(20)) != nil {
			return false
		}
	}
	return true
}

func (a *agent) callHTTP(ctx context.Context, tool, key string, transport http.RoundTripper) history.Record {
	body, _ := json.Marshal(Note{Note: key})
	req, err := http.NewRequestWithContext(httpfence.WithKey(ctx, key), http.MethodPost,
		"http://"+a.cfg.HTTP+"/"+tool, bytes.NewReader(body))
	if err != nil {
		return history.Record{Result: history.ResultInvalid, Err: err.Error()}
	}
	resp, err := (&http.Client{Transport: transport}).Do(req)
	if err != nil {
		return lostOrEnded(err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		return lostOrEnded(err)
	}
	r := history.Record{Result: history.ResultOK, Body: string(answer)}
	switch {
	case resp.StatusCode == http.StatusOK && resp.Header.Get(httpfence.HeaderReplayed) == "true":
		r.Outcome = leases.Replay
	case resp.StatusCode == http.StatusOK:
		r.Outcome = leases.Accepted
	case resp.StatusCode == http.StatusConflict && resp.Header.Get(httpfence.HeaderNewest) != "":
		r.Outcome = leases.Stale
		r.Newest, _ = strconv.ParseInt(resp.Header.Get(httpfence.HeaderNewest), 10, 64)
	case resp.StatusCode == http.StatusConflict:
		r.Outcome = leases.InProgress
	case resp.StatusCode == http.StatusUnprocessableEntity:
		r.Outcome = leases.Conflict
	case resp.StatusCode == http.StatusServiceUnavailable && strings.HasPrefix(string(answer), "outcome unknown"):
		r = history.Record{Result: history.ResultUnknown, Err: string(answer)}
	case resp.StatusCode == http.StatusServiceUnavailable:
		r = history.Record{Result: history.ResultFailed, Err: string(answer)}
	default:
		r = history.Record{Result: history.ResultInvalid, Err: fmt.Sprintf("%d %s", resp.StatusCode, answer)}
	}
	return r
}

func (a *agent) callMCP(ctx context.Context, s *session.Session, tool, key string) history.Record {
	if a.cs == nil {
		transport := &mcp.StreamableClientTransport{Endpoint: "http://" + a.cfg.MCP + "/", DisableStandaloneSSE: true,
			MaxRetries: -1, HTTPClient: a.web}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: a.cfg.Holder}, nil).Connect(ctx, transport, nil)
		if err != nil {
			return history.Record{Result: history.ResultFailed, Err: "connect: " + err.Error()}
		}
		a.cs = cs
	}
	res, err := mcpfence.NewClient(a.cs, s).CallTool(mcpfence.WithKey(ctx, key),
		&mcp.CallToolParams{Name: tool, Arguments: Note{Note: key}})
	if err != nil {
		if !errors.Is(err, session.ErrEnded) {
			_ = a.cs.Close() // the connection may be lost, or the server restarted: a new session
			a.cs = nil
		}
		return lostOrEnded(err)
	}
	r := history.Record{Result: history.ResultOK, Outcome: mcpfence.Outcome(res)}
	for _, c := range res.Content {
		if text, ok := c.(*mcp.TextContent); ok {
			r.Body = text.Text
			break
		}
	}
	switch r.Outcome {
	case leases.Stale:
		newest, _ := res.Meta[mcpfence.MetaNewestEpoch].(float64)
		r.Newest = int64(newest)
	case "":
		failure, _ := res.Meta[mcpfence.MetaFailure].(string)
		r = history.Record{Result: history.ResultInvalid, Err: r.Body}
		switch failure {
		case "outcome unknown":
			r.Result = history.ResultUnknown
		case "failed":
			r.Result = history.ResultFailed
		}
	}
	return r
}

// lostOrEnded is the record of a call that got no answer: not sent, as
// the session had ended, or lost on the way (sent or not, done or not:
// the record will tell).
func lostOrEnded(err error) history.Record {
	if errors.Is(err, session.ErrEnded) {
		return history.Record{Result: history.ResultEnded, Err: err.Error()}
	}
	return history.Record{Result: history.ResultUnknown, Err: err.Error()}
}

// pointTransport announces PointSend before each tool call it sends,
// after the session's check, and waits for the controller's word.
type pointTransport struct {
	a    *agent
	base http.RoundTripper
}

func (p *pointTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Header.Get(httpfence.HeaderEpoch) == "" { // MCP: only its tool calls
		if req.Body == nil || req.Body == http.NoBody {
			return p.base.RoundTrip(req)
		}
		body, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		if !bytes.Contains(body, []byte(`"tools/call"`)) {
			return p.base.RoundTrip(req)
		}
	}
	c := p.a.current
	p.a.rec.Emit(history.Record{Kind: "at", Point: PointSend, Holder: c.Holder, Resource: c.Resource, Epoch: c.Epoch, Value: c.Value})
	if _, ok := <-p.a.answers; !ok {
		return nil, errors.New("the controller is gone")
	}
	p.a.rec.Emit(history.Record{Kind: "sent", ID: p.a.currentID})
	return p.base.RoundTrip(req)
}
