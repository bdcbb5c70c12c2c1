// Package fairtest measures, with real processes, how a lessor hands one
// resource from process to process: how long after a release the next
// grant comes, and how often a waiter is passed over. Each of a test's
// processes (the test binary re-executed in a role of the backend's
// test, see package roles) waits for the resource with session.Wait,
// works under the lease for a while, releases it and at once waits again:
// the holder that releases and re-acquires at once, which an unfair lessor
// lets starve everybody else.
//
// A test kit: used by tests only, never by shipped code (the library, the
// evidence as cmd/run-experiment links it, the commands).
package fairtest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"leases"
	"leases/internal/roles"
	"leases/session"
	"leases/testkit/childtest"
	"leases/testkit/testctx"
)

// Resource is the one resource the processes contend for.
const Resource = "job"

// Config is a run's shape; the zero value of each field means the
// default beside it.
type Config struct {
	// Processes is how many processes contend (6).
	Processes int
	// Grants is how many grants the run observes before it stops (240).
	Grants int
	// TTL is every session's time-to-live (2 s): long beside a handoff,
	// so that a lease is released, not left to expire.
	TTL time.Duration
	// Hold is how long a holder works under each lease before it
	// releases it (20 ms).
	Hold time.Duration
}

// ProcessesEnv, set to a number, replaces a zero Config.Processes: the
// measurement of docs/sqlite.md runs the tests with more processes.
const ProcessesEnv = "LEASES_FAIR_PROCESSES"

func (c Config) withDefaults() Config {
	if n, err := strconv.Atoi(os.Getenv(ProcessesEnv)); c.Processes == 0 && err == nil && n > 0 {
		c.Processes = n
	}
	if c.Processes == 0 {
		c.Processes = 6
	}
	if c.Grants == 0 {
		c.Grants = 240
	}
	if c.TTL == 0 {
		c.TTL = 2 * time.Second
	}
	if c.Hold == 0 {
		c.Hold = 20 * time.Millisecond
	}
	return c
}

// Open makes a contender's lessor of the arguments the test passed to
// Run; done is called when the contender is finished with it.
type Open func(ctx context.Context, args []string) (lessor leases.Lessor, done func() error, err error)

// Role registers the contender role of a backend's test binary, called
// name, whose lessor open makes.
func Role(name string, open Open) roles.Role {
	return roles.Register(name, func(args []string) int { return contend(open, args) })
}

// event is one line a contender writes: it was refused, and so waits
// ("wait"), was granted ("grant"; Called is when it sent the wait's first
// acquire), or is about to release ("release"), at T (the host's wall
// clock in nanoseconds, which every process reads alike).
type event struct {
	Kind   string `json:"kind"`
	Holder string `json:"holder"`
	Epoch  int64  `json:"epoch,omitempty"`
	T      int64  `json:"t"`
	Called int64  `json:"called,omitempty"`
	// Away is, for a grant, the wait's longest time between a refusal's
	// answer and its next acquire, in nanoseconds.
	Away int64 `json:"away,omitempty"`
}

// Run starts cfg.Processes contenders in role, each given args after its
// own settings, and returns the figures of the first cfg.Grants grants.
// The contenders are told to stop (their standard input closes), and
// Run waits for them to exit.
func Run(t *testing.T, role roles.Role, cfg Config, args ...string) Figures {
	t.Helper()
	cfg = cfg.withDefaults()
	ctx := testctx.Context(t)
	events := make(chan event)
	var wg sync.WaitGroup
	children := make([]*childtest.Child, cfg.Processes)
	for i := range children {
		settings := []string{"p" + strconv.Itoa(i), cfg.TTL.String(), cfg.Hold.String()}
		children[i] = childtest.Start(t, role, append(settings, args...)...)
		wg.Add(1)
		go func(c *childtest.Child) {
			defer wg.Done()
			read(ctx, c.Lines, events)
		}(children[i])
	}
	go func() { wg.Wait(); close(events) }()
	var all []event
	grants := 0
	for grants < cfg.Grants {
		var e event
		var ok bool
		select {
		case e, ok = <-events:
		case <-ctx.Done():
			t.Fatalf("%d of %d grants before the test's deadline", grants, cfg.Grants)
		}
		if !ok {
			t.Fatalf("the contenders ended after %d of %d grants", grants, cfg.Grants)
		}
		all = append(all, e)
		if e.Kind == "grant" {
			grants++
		}
	}
	for _, c := range children {
		_ = c.In.Close()
	}
	go func() {
		for range events { // what they say while they stop
		}
	}()
	for i, c := range children {
		if err := c.Wait(); err != nil {
			t.Errorf("contender p%d: %v", i, err)
		}
	}
	return figures(all, cfg.TTL)
}

// read sends the contender's events until its output ends.
func read(ctx context.Context, lines *bufio.Scanner, events chan<- event) {
	for lines.Scan() {
		var e event
		if json.Unmarshal(lines.Bytes(), &e) != nil {
			continue
		}
		select {
		case events <- e:
		case <-ctx.Done():
			return
		}
	}
}

// contend is the contender process: arguments holder, TTL, hold, then the
// backend's. It waits, holds and releases in a loop until its standard
// input ends.
func contend(open Open, args []string) int {
	if len(args) < 3 {
		fmt.Fprintln(os.Stderr, "fairtest: want the holder, the TTL and the hold, then the backend's arguments")
		return 2
	}
	holder := args[0]
	ttl, err1 := time.ParseDuration(args[1])
	hold, err2 := time.ParseDuration(args[2])
	if err1 != nil || err2 != nil {
		fmt.Fprintln(os.Stderr, "fairtest: bad TTL or hold:", args[1], args[2])
		return 2
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		defer cancel()
		_, _ = io.Copy(io.Discard, os.Stdin)
	}()
	lessor, done, err := open(ctx, args[3:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "fairtest:", err)
		return 1
	}
	err = loop(ctx, lessor, holder, session.Options{TTL: ttl}, hold)
	if err := errors.Join(err, done()); err != nil {
		fmt.Fprintln(os.Stderr, "fairtest:", holder+":", err)
		return 1
	}
	return 0
}

// loop waits, holds for hold and releases, again and again, until ctx
// ends. It says "wait" once a wait's first acquire was refused, at the
// time that refusal came back (the waiter then has its place in the
// lessor's line), and "grant" with Called the time the wait's first
// acquire was sent.
func loop(ctx context.Context, lessor leases.Lessor, holder string, opts session.Options, hold time.Duration) error {
	out := json.NewEncoder(os.Stdout)
	say := func(e event) {
		e.Holder = holder
		if e.T == 0 {
			e.T = time.Now().UnixNano()
		}
		_ = out.Encode(e)
	}
	for ctx.Err() == nil {
		w := &watched{Lessor: lessor, say: say}
		s, err := session.Wait(ctx, w, Resource, holder, opts)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		say(event{Kind: "grant", Epoch: s.Epoch(), Called: w.first, Away: w.away})
		work := time.NewTimer(hold) // the work under the lease
		select {
		case <-work.C:
		case <-s.Done():
		case <-ctx.Done():
		}
		work.Stop()
		say(event{Kind: "release", Epoch: s.Epoch()})
		if err := s.Close(context.WithoutCancel(ctx)); err != nil {
			return err
		}
	}
	return nil
}

// watched is a lessor that notes when one wait's first acquire was sent
// (first), says "wait" when the first is refused, and notes the longest
// time from a refusal's answer to the next acquire (away).
type watched struct {
	leases.Lessor
	say            func(event)
	first          int64
	refused        bool
	answered, away int64
}

func (w *watched) Acquire(ctx context.Context, resource, holder string, ttl time.Duration) (leases.Lease, error) {
	now := time.Now().UnixNano()
	if w.first == 0 {
		w.first = now
	}
	if w.answered != 0 {
		w.away = max(w.away, now-w.answered)
	}
	lease, err := w.Lessor.Acquire(ctx, resource, holder, ttl)
	if errors.Is(err, leases.ErrLeaseHeld) {
		w.answered = time.Now().UnixNano()
		if !w.refused {
			w.refused = true
			w.say(event{Kind: "wait", T: w.answered})
		}
	}
	return lease, err
}
