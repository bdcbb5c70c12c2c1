package session_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"leases"
	"leases/session"
)

// Each way a session ends has its own public name, matched with
// errors.Is on Err, on the cause of the holder's context and on the
// Ended event, and its own log line; a renewal that failed but is
// retried matches ErrTransient and never an end, and a definite end never
// matches ErrTransient, whatever failed before it.
func TestAnEndSaysWhichEnd(t *testing.T) {
	unknown := fmt.Errorf("%w: the answer was lost", leases.ErrOutcomeUnknown)
	cases := []struct {
		name   string
		lessor func(b *bench) leases.Lessor
		end    func(t *testing.T, b *bench, s *session.Session)
		want   error
		reason string
		log    string
		failed []error // what every RenewalFailed event's Err must match
	}{
		{"a renewal refused", nil, func(t *testing.T, b *bench, s *session.Session) {
			if err := b.auth.Release(b.ctx, s.Lease(), 1); err != nil { // taken away behind its back
				t.Fatal(err)
			}
			settleUntilEnded(t, b, s)
		}, session.ErrLost, "lost", `level=WARN msg="lease lost"`, nil},
		{"the deadline, renewals unreachable", func(b *bench) leases.Lessor {
			return renewFails{b.lessor, errors.New("connection refused")}
		}, settleUntilEnded, session.ErrDeadline, "deadline", `level=WARN msg="lease session passed its deadline"`,
			[]error{session.ErrTransient}},
		{"the deadline, renewals in doubt", func(b *bench) leases.Lessor {
			return renewFails{b.lessor, unknown}
		}, settleUntilEnded, session.ErrDeadline, "deadline", `level=WARN msg="lease session passed its deadline"`,
			[]error{session.ErrTransient, leases.ErrOutcomeUnknown}},
		{"closed", nil, func(t *testing.T, b *bench, s *session.Session) {
			if err := s.Close(b.ctx); err != nil {
				t.Fatal(err)
			}
		}, session.ErrClosed, "released", `level=INFO msg="lease session closed"`, nil},
		{"closed after its caller's context ended", nil, func(t *testing.T, b *bench, s *session.Session) {
			ctx, cancel := context.WithCancel(b.ctx)
			cancel()
			if err := s.Close(ctx); err != nil {
				t.Fatal(err)
			}
		}, context.Canceled, "cancelled", `level=INFO msg="lease session closed"`, nil},
		{"the store can renew no more", func(b *bench) leases.Lessor {
			return renewFails{b.lessor, fmt.Errorf("%w: reopen it", leases.ErrStoreUnusable)}
		}, settleUntilEnded, leases.ErrStoreUnusable, "store_unusable", `level=WARN msg="lease session ended"`, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newBench(t)
			var lessor leases.Lessor
			if tc.lessor != nil {
				lessor = tc.lessor(b)
			}
			var (
				mu     sync.Mutex
				events []session.Event
				log    bytes.Buffer
			)
			reported := make(chan struct{}) // the end is reported after Done closes
			s := b.start(lessor, "A", session.Options{TTL: 10 * tick, Margin: 2 * tick, RenewEvery: 3 * tick,
				Logger: slog.New(slog.NewTextHandler(&log, nil)),
				OnEvent: func(ev session.Event) {
					mu.Lock()
					defer mu.Unlock()
					events = append(events, ev)
					if ev.Kind == session.Ended {
						close(reported)
					}
				}})
			tc.end(t, b, s)
			<-reported
			err := s.Err()
			if cause := context.Cause(s.Context()); cause != err {
				t.Fatalf("the context's cause %v is not Err %v", cause, err)
			}
			if !errors.Is(err, session.ErrEnded) || !errors.Is(err, tc.want) || session.EndReason(err) != tc.reason {
				t.Fatalf("ended with %v (reason %q); want ErrEnded, %v, reason %q", err, session.EndReason(err), tc.want, tc.reason)
			}
			if errors.Is(err, session.ErrTransient) || errors.Is(err, leases.ErrOutcomeUnknown) {
				t.Fatalf("the end %v matches a transient failure", err)
			}
			for _, other := range []error{session.ErrLost, session.ErrDeadline, session.ErrClosed} {
				if other != tc.want && errors.Is(err, other) && tc.want != context.Canceled {
					t.Fatalf("the end %v matches %v too", err, other)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			last := events[len(events)-1]
			if last.Kind != session.Ended || last.Err != err {
				t.Fatalf("the last event is %v with %v; want Ended with the session's Err", last.Kind, last.Err)
			}
			failures := 0
			for _, ev := range events {
				if ev.Kind != session.RenewalFailed {
					continue
				}
				failures++
				for _, want := range tc.failed {
					if !errors.Is(ev.Err, want) || errors.Is(ev.Err, session.ErrEnded) {
						t.Fatalf("a failed renewal's event says %v; want %v, and no end", ev.Err, want)
					}
				}
			}
			if (failures > 0) != (len(tc.failed) > 0) {
				t.Fatalf("%d failed renewals reported; want them only where renewals failed and were retried", failures)
			}
			wantLog := fmt.Sprintf("%s resource=r holder=A epoch=1", tc.log)
			if !strings.Contains(log.String(), wantLog) || !strings.Contains(log.String(), "reason="+tc.reason) {
				t.Fatalf("the log lacks %q with reason=%s:\n%s", wantLog, tc.reason, log.String())
			}
		})
	}
}

// settleUntilEnded moves the bench's clock a tick at a time until s ends.
func settleUntilEnded(t *testing.T, b *bench, s *session.Session) {
	t.Helper()
	for tick := b.clk.Now() + 1; !b.settle(s, tick, 2); tick++ {
	}
}
