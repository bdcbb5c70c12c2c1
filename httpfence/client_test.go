package httpfence_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"leases/clock"
	"leases/httpfence"
	"leases/session"
	"leases/testkit/sessiontest"
)

// agent is an agent's session on the bench's lessor and its HTTP client.
// Its session counts on a clock of its own, which the test never moves:
// an agent whose process was paused, and does not know its lease ran out.
func agent(t *testing.T, b *sessiontest.Bench, name string) (*session.Session, *http.Client) {
	t.Helper()
	s, err := session.Start(b.Ctx, b.Store.Lessor(), "tools", name, session.Options{TTL: time.Second, Clock: clock.NewManual(b.Clock.Now())})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s, &http.Client{Transport: httpfence.Transport(s, nil)}
}

// The client attaches the session's lease and a key: a retry of the same
// request carries the same derived key (one effect, a replay), WithKey
// gives distinct operations distinct keys, and an agent whose lease ran
// out and that did not notice is refused as stale once the next holder's
// call was admitted.
func TestTransport(t *testing.T) {
	b := sessiontest.New(t)
	tl := newTool(t)
	_, a := agent(t, b, "A")
	if got := tl.send(t, a, "/items", "x"); got.status != 201 || got.body != "item x, 1 in all\n" {
		t.Fatalf("A's first call: %v", got)
	}
	if got := tl.send(t, a, "/items", "x"); got.replayed != "true" || got.body != "item x, 1 in all\n" {
		t.Fatalf("A's retry (the derived key): %v; want the replay", got)
	}
	for i, key := range []string{"one", "two"} {
		resp, body, err := tl.post(httpfence.WithKey(b.Ctx, key), a, "/items", "x", nil)
		if err != nil || resp.StatusCode != 201 || resp.Header.Get(httpfence.HeaderReplayed) != "" {
			t.Fatalf("A's call with key %q: %v %q %v; want a new operation", key, resp.Status, body, err)
		}
		if want := 2 + i; tl.items() != want {
			t.Fatalf("%d items; want %d", tl.items(), want)
		}
	}
	// A's lease runs out on the lessor's clock (A's own clock stands
	// still); B is granted epoch 2 and calls.
	if err := b.Clock.Advance(b.Clock.Now() + time.Second.Milliseconds()); err != nil {
		t.Fatal(err)
	}
	_, bee := agent(t, b, "B")
	if got := tl.send(t, bee, "/items", "y"); got.status != 201 {
		t.Fatalf("B's call: %v", got)
	}
	got := tl.send(t, a, "/items", "z")
	if got.status != 409 || got.newest != "2" {
		t.Fatalf("A's call after B's: %v; want 409 stale, newest 2", got)
	}
	if tl.items() != 4 {
		t.Fatalf("%d items; want 4 (A's x, one and two, B's y)", tl.items())
	}
}

// Once the session has ended, the client sends nothing: its error
// matches session.ErrEnded, and no request reaches the server.
func TestTransportRefusesAfterTheSessionEnded(t *testing.T) {
	b := sessiontest.New(t)
	tl := newTool(t)
	s, a := agent(t, b, "A")
	if err := s.Close(b.Ctx); err != nil {
		t.Fatal(err)
	}
	_, _, err := tl.post(b.Ctx, a, "/items", "x", nil)
	if !errors.Is(err, session.ErrEnded) {
		t.Fatalf("a call after the session ended: %v; want an error matching session.ErrEnded", err)
	}
	if n := tl.requests.Load(); n != 0 {
		t.Fatalf("%d requests reached the server; want none", n)
	}
}

// A command that `leases run` runs sends the lease from its environment.
func TestFromEnvironment(t *testing.T) {
	tl := newTool(t)
	t.Setenv("LEASES_RESOURCE", "tools")
	t.Setenv("LEASES_EPOCH", "3")
	rt, err := httpfence.FromEnvironment(nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := tl.send(t, &http.Client{Transport: rt}, "/items", "x"); got.status != 201 {
		t.Fatalf("a call with the environment's lease: %v", got)
	}
	t.Setenv("LEASES_EPOCH", "")
	if _, err := httpfence.FromEnvironment(nil); err == nil {
		t.Fatal("no LEASES_EPOCH: no error")
	}
}
