// Package health answers a Kubernetes probe, or any HTTP health check,
// for a process's lease sessions. A [Checker] watches the sessions whose
// events it is given (session.Options.OnEvent) and answers 503 Service
// Unavailable while one of them
//
//   - is past its deadline, on the clock read when the request comes: a
//     session whose timer has not fired, because the process was starved
//     or paused, is past its deadline all the same, and its work may go on
//     without the lease; or
//   - has had Options.FailedRenewals renewals in a row fail (3 by
//     default) since its last grant or confirmed renewal, each a
//     transient failure (session.ErrTransient: the session retries): the
//     store is unreachable or in doubt, and the session ends at its
//     deadline unless a renewal comes first.
//
// Otherwise it answers 200 OK. A process that holds no lease is healthy:
// a standby is as healthy as the leader, as in client-go's leader
// election. A session that ended is no longer watched: it ended, and its
// work was told to stop; the end's reason is the metrics' and the log's
// to tell.
//
// The body is JSON: {"status": "ok" or "unhealthy", "sessions": [...]},
// one entry per watched session, sorted by resource, holder and epoch,
// with its resource, holder, epoch, deadline (RFC 3339, UTC; on a manual
// clock, its ticks as milliseconds since 1970), until_deadline (negative
// once past), failed_renewals (in a row), the last failure's error and
// kind (last_failure: transient, or outcome_unknown when the renewal may
// have taken effect), and the problem when there is one. A definite loss
// (session.ErrLost, session.ErrDeadline) ends the session: it is then no
// longer watched.
//
// For Kubernetes: a readiness probe on a Checker with the default
// options takes a holder whose store is failing out of service before its
// session ends. A liveness probe restarts the container, which mends a
// stuck or starved process but not a store that is down: give it a
// Checker with FailedRenewals -1, which fails only past a deadline. The
// probe's periodSeconds and failureThreshold add the patience; keep
// their product below the session's TTL less its margin: a session whose
// renewals keep failing ends at its deadline, and is then no longer
// watched.
package health

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"leases"
	"leases/clock"
	"leases/session"
)

// DefaultFailedRenewals is how many renewals in a row must fail before the
// check fails, when Options.FailedRenewals is zero: the first failure and
// the two retries after it, each after a backoff of 1% to 10% of the TTL
// (doubling), so that a blip one retry mends does not flip the check.
// With a session's default TTL of 15 s, the third failure comes some
// 0.25 to 0.5 s after the first, plus the failed calls' own time.
const DefaultFailedRenewals = 3

// Options tune a Checker; the zero value works on the wall clock.
type Options struct {
	// Clock is the clock the sessions count their deadlines on: their
	// Options.Clock, or the lessor's own where it is driven by one. Nil
	// means the wall clock, which is what a session uses unless told
	// otherwise.
	Clock clock.Clock
	// FailedRenewals is how many renewals in a row must fail for the
	// check to fail. Zero means DefaultFailedRenewals; a negative value
	// means that failed renewals alone never fail it (only a deadline
	// does).
	FailedRenewals int
}

// Checker is the health of the sessions it watches, as an http.Handler.
// Its methods are safe for concurrent use.
type Checker struct {
	clock    clock.Clock
	failures int // failed renewals in a row that fail the check; 0: none do

	mu       sync.Mutex
	sessions map[key]*state
}

// key names one session: one tenure of a resource.
type key struct {
	resource, holder string
	epoch            int64
}

// state is what the events said of a session.
type state struct {
	deadline time.Time
	failed   int // renewals in a row
	lastErr  error
}

// failure is the kind of a failed renewal's error, as the metrics name it.
func failure(err error) string {
	if errors.Is(err, leases.ErrOutcomeUnknown) {
		return "outcome_unknown"
	}
	return "transient"
}

// New returns a Checker that watches no session yet.
func New(opts Options) *Checker {
	c := &Checker{clock: opts.Clock, failures: opts.FailedRenewals, sessions: map[key]*state{}}
	if c.clock == nil {
		c.clock = clock.Wall{}
	}
	switch {
	case c.failures == 0:
		c.failures = DefaultFailedRenewals
	case c.failures < 0:
		c.failures = 0
	}
	return c
}

// OnEvent watches the session of ev: from its grant until its end. Set
// it as session.Options.OnEvent (or call it from the hook there): it
// returns promptly, as a hook must.
func (c *Checker) OnEvent(ev session.Event) {
	k := key{ev.Resource, ev.Holder, ev.Epoch}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch ev.Kind {
	case session.Granted, session.Renewed:
		c.sessions[k] = &state{deadline: ev.Deadline}
	case session.RenewalFailed:
		st := c.sessions[k]
		if st == nil {
			st = &state{}
			c.sessions[k] = st
		}
		st.deadline, st.failed, st.lastErr = ev.Deadline, st.failed+1, ev.Err
	case session.Ended:
		delete(c.sessions, k)
	}
}

// Check is the check without HTTP: nil while every watched session is
// healthy, and otherwise an error naming each session that is not, and
// why. It reads the clock itself.
func (c *Checker) Check() error {
	if rep := c.report(); rep.Status != "ok" {
		var problems []string
		for _, s := range rep.Sessions {
			if s.Problem != "" {
				problems = append(problems, fmt.Sprintf("%q held by %q at epoch %d: %s", s.Resource, s.Holder, s.Epoch, s.Problem))
			}
		}
		return errors.New("health: " + strings.Join(problems, "; "))
	}
	return nil
}

// ServeHTTP answers 200 with the watched sessions while all are healthy,
// and 503 with the same, and each one's problem, otherwise.
func (c *Checker) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	rep := c.report()
	body, err := json.Marshal(rep)
	if err != nil { // strings, numbers and times: it cannot fail
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if rep.Status != "ok" {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_, _ = w.Write(append(body, '\n'))
}

// report is the check's answer.
type report struct {
	Status   string    `json:"status"`
	Sessions []watched `json:"sessions"`
}

// watched is one session in the answer.
type watched struct {
	Resource       string    `json:"resource"`
	Holder         string    `json:"holder"`
	Epoch          int64     `json:"epoch"`
	Deadline       time.Time `json:"deadline"`
	UntilDeadline  string    `json:"until_deadline"`
	FailedRenewals int       `json:"failed_renewals"`
	LastError      string    `json:"last_error,omitempty"`
	LastFailure    string    `json:"last_failure,omitempty"`
	Problem        string    `json:"problem,omitempty"`
}

// report reads the clock and judges every watched session by it.
func (c *Checker) report() report {
	now := time.UnixMilli(c.clock.Now())
	rep := report{Status: "ok", Sessions: []watched{}}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, st := range c.sessions {
		s := watched{Resource: k.resource, Holder: k.holder, Epoch: k.epoch, Deadline: st.deadline.UTC(),
			UntilDeadline: st.deadline.Sub(now).String(), FailedRenewals: st.failed}
		if st.lastErr != nil {
			s.LastError, s.LastFailure = st.lastErr.Error(), failure(st.lastErr)
		}
		var problems []string
		if !now.Before(st.deadline) {
			problems = append(problems, fmt.Sprintf("past its deadline by %v", now.Sub(st.deadline)))
		}
		if c.failures > 0 && st.failed >= c.failures {
			problems = append(problems, fmt.Sprintf("%d renewals in a row failed (the last: %s)", st.failed, strings.ReplaceAll(s.LastFailure, "_", " ")))
		}
		if len(problems) > 0 {
			s.Problem, rep.Status = strings.Join(problems, "; "), "unhealthy"
		}
		rep.Sessions = append(rep.Sessions, s)
	}
	slices.SortFunc(rep.Sessions, func(a, b watched) int {
		return cmp.Or(cmp.Compare(a.Resource, b.Resource), cmp.Compare(a.Holder, b.Holder), cmp.Compare(a.Epoch, b.Epoch))
	})
	return rep
}
