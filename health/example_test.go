package health_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"leases/clock"
	"leases/health"
	"leases/session"
	"leases/sqlite"
)

// probes serves a Kubernetes readiness probe and a liveness probe for the
// sessions started with the options it returns (opts, with their events
// fed to both checks as well as to opts.OnEvent). /readyz fails while a
// session is past its deadline or its renewals are failing: the holder
// should take no traffic. /livez fails only past a deadline: a restart
// mends a stuck or starved process, not a store that is down.
//
// Its imports:
//
//	import (
//		"net/http"
//
//		"leases/health"
//		"leases/session"
//	)
func probes(opts session.Options) (session.Options, http.Handler) {
	ready := health.New(health.Options{Clock: opts.Clock})
	live := health.New(health.Options{Clock: opts.Clock, FailedRenewals: -1})
	also := opts.OnEvent
	opts.OnEvent = func(ev session.Event) {
		ready.OnEvent(ev)
		live.OnEvent(ev)
		if also != nil {
			also(ev)
		}
	}
	mux := http.NewServeMux()
	mux.Handle("GET /readyz", ready)
	mux.Handle("GET /livez", live)
	return opts, mux
}

// A session's events feed the probes: healthy while it lives, and, once
// it is closed, healthy with nothing to watch. Here the clock is a manual
// one, so that the deadline printed is the same on every run: the
// session lives 7.99 s (its TTL less a margin of a fifth and the drift
// allowance).
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "leases-health-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	clk := clock.NewManual(0)
	store, err := sqlite.Options{Clock: clk}.Open(ctx, filepath.Join(dir, "leases.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()
	opts, handler := probes(session.Options{TTL: 10 * time.Second, Clock: clk})
	s, err := session.Start(ctx, store.Lessor(), "invoices", "worker-1", opts)
	if err != nil {
		fmt.Println(err)
		return
	}
	probe(handler, "/readyz")
	if err := s.Close(ctx); err != nil {
		fmt.Println(err)
	}
	probe(handler, "/livez")
	// Output:
	// /readyz 200 {"status":"ok","sessions":[{"resource":"invoices","holder":"worker-1","epoch":1,"deadline":"1970-01-01T00:00:07.99Z","until_deadline":"7.99s","failed_renewals":0}]}
	// /livez 200 {"status":"ok","sessions":[]}
}

// The check reads the clock when the probe comes: a session past its
// deadline fails it even though its own timer has not fired (the process
// was starved, or paused and resumed), and no end was reported.
func Example_pastDeadline() {
	clk := clock.NewManual(0)
	checker := health.New(health.Options{Clock: clk})
	checker.OnEvent(session.Event{Kind: session.Granted, Resource: "invoices", Holder: "worker-1", Epoch: 1,
		Deadline: time.UnixMilli(7990)})
	if err := clk.Advance(9000); err != nil {
		fmt.Println(err)
		return
	}
	probe(checker, "/livez")
	fmt.Println(checker.Check())
	// Output:
	// /livez 503 {"status":"unhealthy","sessions":[{"resource":"invoices","holder":"worker-1","epoch":1,"deadline":"1970-01-01T00:00:07.99Z","until_deadline":"-1.01s","failed_renewals":0,"problem":"past its deadline by 1.01s"}]}
	// health: "invoices" held by "worker-1" at epoch 1: past its deadline by 1.01s
}

// probe prints the handler's answer to a probe's GET of path.
func probe(handler http.Handler, path string) {
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	fmt.Print(path, " ", rec.Code, " ", rec.Body)
}
