package health_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"leases"
	"leases/clock"
	"leases/health"
	"leases/session"
	"leases/testkit/sessiontest"
)

// A session on a real SQLite store, on a manual clock; the probe reads a
// clock of its own, so that a test can put the probe past a deadline that
// the session's own timer has not reached (a process starved or paused
// between its timer and the probe). Each session lives 799 ticks after
// its grant or renewal, renews every 266, and retries a failed renewal
// after 5 to 10 ticks, then 10 to 20, then 20 to 40.
func TestTheCheckFailsPastADeadlineOrWhileRenewalsFail(t *testing.T) {
	failing := []sessiontest.Renewal{{Err: errors.New("connection refused")}, {Err: errors.New("connection refused")},
		{Err: errors.New("connection refused")}}
	for _, tc := range []struct {
		name     string
		opts     health.Options
		script   []sessiontest.Renewal // the session's renewals; nil: no session
		moves    []int64               // the session's clock, in steps
		closed   bool
		probe    int64 // the probe's clock
		wantCode int
		wantBody string
	}{
		{
			name: "no session", probe: 5000, wantCode: http.StatusOK,
			wantBody: `{"status":"ok","sessions":[]}`,
		},
		{
			name: "healthy", script: []sessiontest.Renewal{}, moves: []int64{266}, probe: 266, wantCode: http.StatusOK,
			wantBody: `{"status":"ok","sessions":[{"resource":"r","holder":"A","epoch":1,"deadline":"1970-01-01T00:00:01.065Z",` +
				`"until_deadline":"799ms","failed_renewals":0}]}`,
		},
		{
			name: "two renewals failing", script: failing, moves: []int64{266, 276}, probe: 276, wantCode: http.StatusOK,
			wantBody: `{"status":"ok","sessions":[{"resource":"r","holder":"A","epoch":1,"deadline":"1970-01-01T00:00:00.799Z",` +
				`"until_deadline":"523ms","failed_renewals":2,"last_error":"session: renewal failed, to be retried before the deadline: connection refused","last_failure":"transient"}]}`,
		},
		{
			name: "renewal failing", script: failing, moves: []int64{266, 276, 296}, probe: 296, wantCode: http.StatusServiceUnavailable,
			wantBody: `{"status":"unhealthy","sessions":[{"resource":"r","holder":"A","epoch":1,"deadline":"1970-01-01T00:00:00.799Z",` +
				`"until_deadline":"503ms","failed_renewals":3,"last_error":"session: renewal failed, to be retried before the deadline: connection refused","last_failure":"transient","problem":"3 renewals in a row failed (the last: transient)"}]}`,
		},
		{
			name: "renewed after failing", script: failing, moves: []int64{266, 276, 296, 336}, probe: 336, wantCode: http.StatusOK,
			wantBody: `{"status":"ok","sessions":[{"resource":"r","holder":"A","epoch":1,"deadline":"1970-01-01T00:00:01.135Z",` +
				`"until_deadline":"799ms","failed_renewals":0}]}`,
		},
		{
			name: "renewal failing, deadline only", opts: health.Options{FailedRenewals: -1},
			script: failing, moves: []int64{266, 276, 296}, probe: 296, wantCode: http.StatusOK,
			wantBody: `{"status":"ok","sessions":[{"resource":"r","holder":"A","epoch":1,"deadline":"1970-01-01T00:00:00.799Z",` +
				`"until_deadline":"503ms","failed_renewals":3,"last_error":"session: renewal failed, to be retried before the deadline: connection refused","last_failure":"transient"}]}`,
		},
		{
			name: "past deadline", script: []sessiontest.Renewal{}, probe: 800, wantCode: http.StatusServiceUnavailable,
			wantBody: `{"status":"unhealthy","sessions":[{"resource":"r","holder":"A","epoch":1,"deadline":"1970-01-01T00:00:00.799Z",` +
				`"until_deadline":"-1ms","failed_renewals":0,"problem":"past its deadline by 1ms"}]}`,
		},
		{
			name: "at the deadline", script: []sessiontest.Renewal{}, probe: 799, wantCode: http.StatusServiceUnavailable,
			wantBody: `{"status":"unhealthy","sessions":[{"resource":"r","holder":"A","epoch":1,"deadline":"1970-01-01T00:00:00.799Z",` +
				`"until_deadline":"0s","failed_renewals":0,"problem":"past its deadline by 0s"}]}`,
		},
		{
			name: "ended at its deadline", script: []sessiontest.Renewal{}, moves: []int64{799}, probe: 800, wantCode: http.StatusOK,
			wantBody: `{"status":"ok","sessions":[]}`,
		},
		{
			name: "closed", script: []sessiontest.Renewal{}, closed: true, probe: 800, wantCode: http.StatusOK,
			wantBody: `{"status":"ok","sessions":[]}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := sessiontest.New(t)
			probe := clock.NewManual(0)
			tc.opts.Clock = probe
			checker := health.New(tc.opts)
			if tc.script != nil {
				s, reported := start(t, b, checker, tc.script)
				for _, tick := range tc.moves {
					b.Move(tick, s.Done(), 2)
				}
				if tc.closed {
					if err := s.Close(b.Ctx); err != nil {
						t.Fatal(err)
					}
				}
				// Done closes when the session ends, and the end reaches
				// the checker after (session.end): until then the check
				// still sees the session, past its deadline.
				select {
				case <-s.Done():
					select {
					case <-reported:
					case <-b.Ctx.Done():
						t.Fatal("the session ended, and its end never reached the checker")
					}
				default:
				}
			}
			if err := probe.Advance(tc.probe); err != nil {
				t.Fatal(err)
			}
			code, body := get(t, checker)
			if code != tc.wantCode || body != tc.wantBody {
				t.Errorf("%d %s\nwant %d %s", code, body, tc.wantCode, tc.wantBody)
			}
			if err := checker.Check(); (err == nil) != (tc.wantCode == http.StatusOK) {
				t.Errorf("Check: %v, while the handler answers %d", err, code)
			}
		})
	}
}

// start starts A's session on "r", its renewals as script says, its
// events fed to checker, and returns once it waits on the clock; the
// channel closes once the checker has had the session's end.
func start(t *testing.T, b *sessiontest.Bench, checker *health.Checker, script []sessiontest.Renewal) (*session.Session, <-chan struct{}) {
	t.Helper()
	lessor := &sessiontest.Renewals{Lessor: b.Store.Lessor(), Clock: b.Clock, Script: script}
	reported := make(chan struct{})
	onEvent := func(ev session.Event) {
		checker.OnEvent(ev)
		if ev.Kind == session.Ended {
			close(reported)
		}
	}
	s, err := session.Start(b.Ctx, lessor, "r", "A",
		session.Options{TTL: 1000 * time.Millisecond, Clock: b.Clock, OnEvent: onEvent})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	b.Move(0, s.Done(), 2)
	return s, reported
}

// get is the checker's answer to a probe's GET: its status and body.
func get(t *testing.T, checker http.Handler) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	checker.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if got := rec.Header().Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type %q", got)
	}
	return rec.Code, strings.TrimSuffix(rec.Body.String(), "\n")
}

// Check names the session that is not healthy, and why.
func TestCheckSaysWhy(t *testing.T) {
	probe := clock.NewManual(0)
	checker := health.New(health.Options{Clock: probe})
	checker.OnEvent(session.Event{Kind: session.Granted, Resource: "r", Holder: "A", Epoch: 1, Deadline: time.UnixMilli(799)})
	for range 3 {
		checker.OnEvent(session.Event{Kind: session.RenewalFailed, Resource: "r", Holder: "A", Epoch: 1,
			Deadline: time.UnixMilli(799), Err: fmt.Errorf("%w: %w", session.ErrTransient, leases.ErrOutcomeUnknown)})
	}
	if err := probe.Advance(1000); err != nil {
		t.Fatal(err)
	}
	want := `health: "r" held by "A" at epoch 1: past its deadline by 201ms; 3 renewals in a row failed (the last: outcome unknown)`
	if err := checker.Check(); err == nil || err.Error() != want {
		t.Fatalf("Check: %v; want %s", err, want)
	}
	checker.OnEvent(session.Event{Kind: session.Ended, Resource: "r", Holder: "A", Epoch: 1, Err: session.ErrEnded})
	if err := checker.Check(); err != nil {
		t.Fatalf("Check after the end: %v", err)
	}
}
