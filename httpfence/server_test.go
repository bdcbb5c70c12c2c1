package httpfence_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"leases/fence"
	"leases/httpfence"
	"leases/ops"
	"leases/testkit/sqlitetest"
	"leases/testkit/testctx"
)

// tool is a tool server behind the middleware, on a SQLite file of its
// own: POST /items stores an item in the record's transaction (and fails
// with a 500 on the body "fail"), POST /mail "sends" a mail, an outside
// effect (a count), and when hold is set tells started and waits for
// hold to close.
type tool struct {
	server   *httptest.Server
	items    func() int
	sent     atomic.Int64
	requests atomic.Int64 // every request that reached the server
	hold     chan struct{}
	started  chan struct{}
}

func newTool(t *testing.T) *tool {
	t.Helper()
	ctx := testctx.Context(t)
	db := sqlitetest.OpenDirectly(t, filepath.Join(t.TempDir(), "tool.db"))
	t.Cleanup(func() { _ = db.Close() })
	table, err := ops.New(db, ops.Options{Dialect: fence.SQLite})
	if err == nil {
		err = table.Create(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE items (name TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	tl := &tool{}
	items := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if string(body) == "fail" {
			http.Error(w, "the tool failed", http.StatusInternalServerError)
			return
		}
		tx := httpfence.Tx(r)
		var n int
		_, err := tx.ExecContext(r.Context(), `INSERT INTO items VALUES (?)`, string(body))
		if err == nil {
			err = tx.QueryRowContext(r.Context(), `SELECT count(*) FROM items`).Scan(&n)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "item %s, %d in all\n", body, n)
	})
	mail := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if httpfence.Tx(r) != nil {
			t.Error("an outside effect was given a transaction")
		}
		if tl.hold != nil {
			close(tl.started)
			<-tl.hold
		}
		fmt.Fprintf(w, "mail %d sent\n", tl.sent.Add(1))
	})
	mux := http.NewServeMux()
	mux.Handle("POST /items", httpfence.Handler(table, items))
	mux.Handle("POST /mail", httpfence.External(table, mail))
	tl.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tl.requests.Add(1)
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(tl.server.Close)
	tl.items = func() int {
		var n int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM items`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	return tl
}

// answer is a response as the tests compare it: status, the headers the
// middleware sets, and the body.
type answer struct {
	status                                          int
	typ, replayed, newest, retryAfter, record, body string
}

func (a answer) String() string {
	return fmt.Sprintf("%d type=%q replayed=%q newest=%q retry-after=%q record=%q %q", a.status, a.typ, a.replayed, a.newest, a.retryAfter, a.record, a.body)
}

// send sends a request to the tool through client (the server's own
// when nil), with the given headers ("Name: value" each).
func (tl *tool) send(t *testing.T, client *http.Client, path, body string, headers ...string) answer {
	t.Helper()
	resp, b, err := tl.post(testctx.Context(t), client, path, body, headers)
	if err != nil {
		t.Fatal(err)
	}
	return answer{resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get(httpfence.HeaderReplayed),
		resp.Header.Get(httpfence.HeaderNewest), resp.Header.Get("Retry-After"), resp.Header.Get("Leases-Record"), string(b)}
}

// post is send's request, its response and the response's body.
func (tl *tool) post(ctx context.Context, client *http.Client, path, body string, headers []string) (*http.Response, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, tl.server.URL+path, strings.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	for _, h := range headers {
		name, value, _ := strings.Cut(h, ": ")
		req.Header.Set(name, value)
	}
	if client == nil {
		client = tl.server.Client()
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

func token(epoch int, key string) []string {
	h := []string{"Leases-Resource: tools", fmt.Sprintf("Leases-Epoch: %d", epoch)}
	if key != "" {
		h = append(h, "Idempotency-Key: "+key)
	}
	return h
}

const oneLine = "text/plain; charset=utf-8"

// Every answer of the middleware, each case on a tool of its own: the
// steps' answers, and the effects left.
func TestAnswers(t *testing.T) {
	type step struct {
		path, body string
		headers    []string
		want       answer
	}
	item := func(epoch int, key, body string, want answer) step {
		return step{"/items", body, token(epoch, key), want}
	}
	created := func(body string) answer { return answer{status: 201, typ: "text/plain", body: body} }
	replayed := func(a answer) answer { a.replayed = "true"; return a }
	refused := func(status int, body string) answer { return answer{status: status, typ: oneLine, body: body} }
	for _, c := range []struct {
		name  string
		steps []step
		items int
	}{
		{"accepted", []step{item(1, "k1", "a", created("item a, 1 in all\n"))}, 1},
		{"a retry is a replay, one effect", []step{
			item(1, "k1", "a", created("item a, 1 in all\n")),
			item(1, "k1", "a", replayed(created("item a, 1 in all\n")))}, 1},
		{"many operations in one tenure", []step{
			item(1, "k1", "a", created("item a, 1 in all\n")),
			item(1, "k2", "b", created("item b, 2 in all\n"))}, 2},
		{"the same key with another body is a conflict", []step{
			item(1, "k1", "a", created("item a, 1 in all\n")),
			item(1, "k1", "b", refused(422, "conflict: this key was used with another request\n"))}, 1},
		{"an older epoch after a newer one is stale", []step{
			item(2, "k1", "a", created("item a, 1 in all\n")),
			item(1, "k2", "b", answer{status: 409, typ: oneLine, newest: "2",
				body: "stale: epoch 2 was admitted for this resource, newer than the request's\n"})}, 1},
		{"a server error is not recorded: the retry runs again", []step{
			item(1, "k1", "fail", answer{status: 500, typ: oneLine, body: "the tool failed\n"}),
			item(1, "k1", "fail", answer{status: 500, typ: oneLine, body: "the tool failed\n"})}, 0},
		{"no resource", []step{{"/items", "a", []string{"Leases-Epoch: 1", "Idempotency-Key: k"},
			refused(428, "the request needs the headers Leases-Resource and Leases-Epoch: the caller's lease\n")}}, 0},
		{"no epoch", []step{{"/items", "a", []string{"Leases-Resource: tools", "Idempotency-Key: k"},
			refused(428, "the request needs the headers Leases-Resource and Leases-Epoch: the caller's lease\n")}}, 0},
		{"a malformed epoch", []step{{"/items", "a", []string{"Leases-Resource: tools", "Leases-Epoch: 1.5", "Idempotency-Key: k"},
			refused(400, "Leases-Epoch \"1.5\" is not an epoch (an integer of at least 1)\n")}}, 0},
		{"epoch 0", []step{{"/items", "a", []string{"Leases-Resource: tools", "Leases-Epoch: 0", "Idempotency-Key: k"},
			refused(400, "Leases-Epoch \"0\" is not an epoch (an integer of at least 1)\n")}}, 0},
		{"no key", []step{item(1, "", "a", refused(400, "the request needs the header Idempotency-Key: the operation's key\n"))}, 0},
		{"a key too long", []step{item(1, strings.Repeat("k", 300), "a", refused(400,
			"ops: do: invalid input: operation key is 300 bytes, more than 256\n"))}, 0},
		{"a body too large", []step{item(1, "k1", strings.Repeat("x", httpfence.MaxRequestBytes+1),
			refused(413, fmt.Sprintf("the body is over %d bytes\n", httpfence.MaxRequestBytes)))}, 0},
		{"an outside effect, then its replay", []step{
			{"/mail", "hi", token(1, "m1"), answer{status: 200, typ: oneLine, body: "mail 1 sent\n"}},
			{"/mail", "hi", token(1, "m1"), answer{status: 200, typ: oneLine, replayed: "true", body: "mail 1 sent\n"}}}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			tl := newTool(t)
			for i, s := range c.steps {
				if got := tl.send(t, nil, s.path, s.body, s.headers...); got != s.want {
					t.Fatalf("step %d: %v\nwant    %v", i, got, s.want)
				}
			}
			if got := tl.items(); got != c.items {
				t.Fatalf("%d items stored; want %d", got, c.items)
			}
		})
	}
}

// A replay is the stored answer to the byte, with the header that says
// so: status, Content-Type, Content-Length and body as the first.
func TestReplayIsByteIdentical(t *testing.T) {
	tl := newTool(t)
	raw := func() (*http.Response, []byte) {
		resp, b, err := tl.post(testctx.Context(t), nil, "/items", "a", token(1, "k1"))
		if err != nil {
			t.Fatal(err)
		}
		return resp, b
	}
	first, firstBody := raw()
	again, againBody := raw()
	if !bytes.Equal(firstBody, againBody) || first.StatusCode != again.StatusCode {
		t.Fatalf("replay %d %q; the first answer was %d %q", again.StatusCode, againBody, first.StatusCode, firstBody)
	}
	for _, h := range []string{"Content-Type", "Content-Length"} {
		if first.Header.Get(h) != again.Header.Get(h) {
			t.Errorf("%s: replay %q, first %q", h, again.Header.Get(h), first.Header.Get(h))
		}
	}
	if first.Header.Get(httpfence.HeaderReplayed) != "" || again.Header.Get(httpfence.HeaderReplayed) != "true" {
		t.Errorf("Idempotent-Replayed: first %q, replay %q; want none, then true", first.Header.Get(httpfence.HeaderReplayed), again.Header.Get(httpfence.HeaderReplayed))
	}
}

// A retry that arrives while the first call's outside effect runs is
// answered 409 in progress with Retry-After, and the effect is done once;
// after the first call, the retry is its replay. The order comes from the
// effect's handshake.
func TestInProgress(t *testing.T) {
	tl := newTool(t)
	tl.hold, tl.started = make(chan struct{}), make(chan struct{})
	var released sync.Once
	release := func() { released.Do(func() { close(tl.hold) }) }
	t.Cleanup(release) // a failing test lets the held call end, and the server close
	ctx := testctx.Context(t)
	first := make(chan answer, 1)
	go func() {
		// (t.Fatal is not for this goroutine: a failure shows as a wrong answer.)
		first <- sendQuietly(ctx, tl, "/mail", "hi", token(1, "m1"))
	}()
	<-tl.started
	inProgress := answer{status: 409, typ: oneLine, retryAfter: "1", body: "in progress: the first request with this key has not finished\n"}
	if got := tl.send(t, nil, "/mail", "hi", token(1, "m1")...); got != inProgress {
		t.Fatalf("a retry while the effect runs: %v\nwant %v", got, inProgress)
	}
	release()
	if got := <-first; got.status != 200 || got.body != "mail 1 sent\n" {
		t.Fatalf("the first call: %v", got)
	}
	tl.hold = nil
	if got := tl.send(t, nil, "/mail", "hi", token(1, "m1")...); got.replayed != "true" || got.body != "mail 1 sent\n" {
		t.Fatalf("the retry after the first call: %v; want its replay", got)
	}
	if n := tl.sent.Load(); n != 1 {
		t.Fatalf("%d mails sent; want 1", n)
	}
}

func sendQuietly(ctx context.Context, tl *tool, path, body string, headers []string) answer {
	resp, b, err := tl.post(ctx, nil, path, body, headers)
	if err != nil {
		return answer{body: err.Error()}
	}
	return answer{status: resp.StatusCode, body: string(b)}
}
