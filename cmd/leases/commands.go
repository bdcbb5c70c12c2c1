package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"leases"
	"leases/internal/rules"
)

// holders prints who holds what, and until when: the named resources, or
// every live lease.
func (c *cli) holders(name string, args []string) int {
	f := c.newFlags(name, holdersUsage)
	asJSON := f.Bool("json", false, "print JSON for scripts")
	arguments, rest, _, code, done := c.parse(f, args)
	if done {
		return code
	}
	resources := append(arguments, rest...)
	ctx := context.Background()
	s, err := c.open(ctx, f, false)
	if err != nil {
		return c.fail(name, err)
	}
	defer c.closeStore(name, s)
	live, now, err := s.live(ctx, resources)
	if err != nil {
		return c.fail(name, err)
	}
	var free []string
	for _, r := range resources {
		if !slices.ContainsFunc(live, func(l leases.Lease) bool { return l.Resource == r }) && !slices.Contains(free, r) {
			free = append(free, r)
		}
	}
	if *asJSON {
		out := holdersJSON{Store: s.backend.name, Clock: s.backend.clock, Now: stamp(now, time.UTC),
			Leases: []leaseJSON{}, Free: free}
		if free == nil {
			out.Free = []string{}
		}
		for _, l := range live {
			out.Leases = append(out.Leases, s.json(l, now, true))
			out.AtTheLatest = out.AtTheLatest || !l.Exact()
		}
		return c.printJSON(name, out)
	}
	if len(live) == 0 && len(free) == 0 {
		fmt.Fprintf(c.stdout, "no live leases (times: %s)\n", s.backend.note)
		return exitOK
	}
	w := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "RESOURCE\tHOLDER\tEPOCH\tEXPIRES IN\tEXPIRES AT")
	for _, l := range live {
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\n", shown(l.Resource), shown(l.Holder), l.Epoch, s.left(l, now, true), stamp(l.ExpiresAt, time.Local))
	}
	for _, r := range free {
		fmt.Fprintf(w, "%s\t-\t-\tfree\t-\n", shown(r))
	}
	_ = w.Flush()
	fmt.Fprintf(c.stdout, "times: %s\n", s.backend.note)
	return exitOK
}

// live is the live leases on resources (every one when none is named),
// and the tick of the store's clock they were read at.
func (s *store) live(ctx context.Context, resources []string) (live []leases.Lease, now int64, err error) {
	return s.lessor.Live(ctx, resources...)
}

// acquire grants a lease on one resource to --holder for --ttl.
func (c *cli) acquire(name string, args []string) int {
	f := c.newFlags(name, acquireUsage)
	holder := f.String("holder", "", "the holder's `name` (required): give the same to renew and release")
	ttl := f.duration("ttl", 0, "30s", "how long the lease lives unless renewed (required), a `duration` such as 30s")
	asJSON := f.Bool("json", false, "print the lease as JSON")
	resource, ctx, s, code, done := c.prepare(f, name, args, true, func() error {
		return firstErr(requireName(f, "holder", *holder), requireDuration(f, "ttl"))
	})
	if done {
		return code
	}
	defer c.closeStore(name, s)
	lease, err := s.lessor.Acquire(ctx, resource, *holder, *ttl)
	var held *leases.HeldError
	switch {
	case errors.As(err, &held):
		return c.fail(name, fmt.Errorf("%q is held by %q at epoch %d for %s more (until %s, %s): %w",
			resource, held.Live.Holder, held.Live.Epoch, human(held.Live.ExpiresAt-held.At, !held.Live.Exact()),
			stamp(held.Live.ExpiresAt, time.Local), s.backend.clock, leases.ErrLeaseHeld))
	case errors.Is(err, leases.ErrOutcomeUnknown) && lease.Epoch > 0:
		return c.fail(name, fmt.Errorf("outcome unknown: assume %q may be held by %q at epoch %d until %s (%s): %w",
			resource, lease.Holder, lease.Epoch, stamp(lease.ExpiresAt, time.Local), s.backend.clock, err))
	case err != nil:
		return c.fail(name, err)
	}
	c.warnTTL(name, s, *ttl, lease.ExpiresAt-lease.GrantedAt)
	return c.printLease(name, s, "acquired", lease, lease.GrantedAt, true, *asJSON)
}

// warnTTL says, on stderr, when the store gave a lease another TTL than
// --ttl asked for, lives ms (etcd: whole seconds, and at least its
// minimum, which etcd alone knows): how long it lives, and why. The
// command goes on: the lease lives longer than asked (a renewal on etcd
// may give less, the TTL of its grant), and a run's session counts the
// TTL asked for, so that CMD is stopped before the session's own belief
// ends.
func (c *cli) warnTTL(name string, s *store, asked time.Duration, lives int64) {
	if s.backend.ttls == "" {
		return
	}
	got := time.Duration((lives+999)/1000) * time.Second // etcd's whole seconds
	if got != asked {
		fmt.Fprintf(c.stderr, "leases: %s: warning: the lease lives %v, not --ttl %v: %s\n", name, got, asked, s.backend.ttls)
	}
}

// renew extends --holder's lease at --epoch to --ttl from now.
func (c *cli) renew(name string, args []string) int {
	f := c.newFlags(name, renewUsage)
	holder := f.String("holder", "", "the holder's `name` (required)")
	epoch := f.Int64("epoch", 0, "the lease's `epoch` (required), as acquire or holders printed it")
	ttl := f.duration("ttl", 0, "30s", "how long from now the lease lives (required), a `duration` such as 30s")
	asJSON := f.Bool("json", false, "print the lease as JSON")
	resource, ctx, s, code, done := c.prepare(f, name, args, false, func() error {
		return firstErr(requireName(f, "holder", *holder), requireEpoch(f, *epoch), requireDuration(f, "ttl"))
	})
	if done {
		return code
	}
	defer c.closeStore(name, s)
	lease, err := s.lessor.Renew(ctx, leases.Lease{Resource: resource, Holder: *holder, Epoch: *epoch}, *ttl)
	if err != nil {
		return c.fail(name, err)
	}
	c.warnTTL(name, s, *ttl, lease.ExpiresAt-time.Now().UnixMilli())
	return c.printLease(name, s, "renewed", lease, time.Now().UnixMilli(), onThisClock(lease), *asJSON)
}

// release ends --holder's lease at --epoch, if it is still the live one.
func (c *cli) release(name string, args []string) int {
	f := c.newFlags(name, releaseUsage)
	holder := f.String("holder", "", "the holder's `name` (required), as holders printed it")
	epoch := f.Int64("epoch", 0, "the lease's `epoch` (required), as holders printed it")
	asJSON := f.Bool("json", false, "print what was released as JSON")
	resource, ctx, s, code, done := c.prepare(f, name, args, false, func() error {
		return firstErr(requireName(f, "holder", *holder), requireEpoch(f, *epoch))
	})
	if done {
		return code
	}
	defer c.closeStore(name, s)
	if err := s.lessor.Release(ctx, leases.Lease{Resource: resource, Holder: *holder, Epoch: *epoch}); err != nil {
		return c.fail(name, err)
	}
	if *asJSON {
		return c.printJSON(name, releasedJSON{Resource: resource, Holder: *holder, Epoch: *epoch, Released: true})
	}
	fmt.Fprintf(c.stdout, "released %s (%s, epoch %d)\n", shown(resource), shown(*holder), *epoch)
	return exitOK
}

// prepare parses a command on one resource, checks its flags with check,
// and opens the store: done is true when the command must return code.
func (c *cli) prepare(f *flags, name string, args []string, create bool, check func() error) (resource string, ctx context.Context, s *store, code int, done bool) {
	arguments, rest, _, code, done := c.parse(f, args)
	if done {
		return "", nil, nil, code, true
	}
	resource, err := oneArgument(name, append(arguments, rest...))
	if err == nil {
		err = check()
	}
	if err == nil {
		ctx = context.Background()
		s, err = c.open(ctx, f, create)
	}
	if err != nil {
		return "", nil, nil, c.fail(name, err), true
	}
	return resource, ctx, s, 0, false
}

// requireName refuses a name flag that is missing or empty; the store
// checks the rest (leases.ErrInvalidInput).
func requireName(f *flags, flag, value string) error {
	if !f.given(flag) {
		return usagef("--%s is required", flag)
	}
	return nonEmpty(flag, value)
}

// nonEmpty refuses a name flag given as "".
func nonEmpty(flag, value string) error {
	if value == "" {
		return usagef("--%s \"\" is empty: want a name", flag)
	}
	return nil
}

// requireEpoch refuses an --epoch that is missing or below 1.
func requireEpoch(f *flags, epoch int64) error {
	switch {
	case !f.given("epoch"):
		return usagef("--epoch is required: the lease's epoch, 1 or more, as holders prints it")
	case epoch < 1:
		return usagef("--epoch %d: want the lease's epoch, 1 or more, as holders prints it", epoch)
	}
	return nil
}

// printLease prints one lease, on one line or as JSON. now is a tick of
// the lease's clock, used only when known.
func (c *cli) printLease(name string, s *store, verb string, l leases.Lease, now int64, known, asJSON bool) int {
	if asJSON {
		out := s.json(l, now, known)
		out.Clock = s.backend.clock
		return c.printJSON(name, out)
	}
	left := ""
	if known {
		left = " in " + s.left(l, now, true)
	}
	fmt.Fprintf(c.stdout, "%s %s for %s: epoch %d, expires%s at %s (%s)\n",
		verb, shown(l.Resource), shown(l.Holder), l.Epoch, left, stamp(l.ExpiresAt, time.Local), s.backend.clock)
	return exitOK
}

// shown is a name as a line of text shows it: as it is, or quoted, with
// its escapes, where it would not print as itself (a control character,
// a tab or a newline, which would break the line or the table's columns,
// or spaces at an end). The library refuses such names now; a store may
// still hold some from before.
func shown(name string) string {
	if rules.CheckName("name", name) != nil || strings.TrimSpace(name) != name {
		return strconv.Quote(name)
	}
	return name
}

func (c *cli) printJSON(name string, v any) int {
	out, err := json.Marshal(v)
	if err != nil {
		return c.fail(name, err)
	}
	fmt.Fprintf(c.stdout, "%s\n", out)
	return exitOK
}

// leaseJSON is a lease as --json prints it.
type leaseJSON struct {
	Resource string `json:"resource"`
	Holder   string `json:"holder"`
	Epoch    int64  `json:"epoch"`
	// ExpiresAt is RFC 3339 in UTC, to the millisecond, on the store's
	// clock (see Clock, or the listing's).
	ExpiresAt string `json:"expires_at"`
	// ExpiresInMs is how long the lease has left, on the store's clock;
	// absent when this machine cannot tell.
	ExpiresInMs *int64 `json:"expires_in_ms,omitempty"`
	Clock       string `json:"clock,omitempty"`
}

type holdersJSON struct {
	Store string `json:"store"`
	Clock string `json:"clock"`
	// AtTheLatest: each expiry is a bound above the real one (etcd).
	AtTheLatest bool        `json:"at_the_latest"`
	Now         string      `json:"now,omitempty"`
	Leases      []leaseJSON `json:"leases"`
	// Free are the named resources that no live lease holds.
	Free []string `json:"free"`
}

type releasedJSON struct {
	Resource string `json:"resource"`
	Holder   string `json:"holder"`
	Epoch    int64  `json:"epoch"`
	Released bool   `json:"released"`
}

func (s *store) json(l leases.Lease, now int64, known bool) leaseJSON {
	out := leaseJSON{Resource: l.Resource, Holder: l.Holder, Epoch: l.Epoch, ExpiresAt: stamp(l.ExpiresAt, time.UTC)}
	if known {
		left := max(0, l.ExpiresAt-now)
		out.ExpiresInMs = &left
	}
	return out
}

// left is how long l has at tick now, in human units: "at most" where
// the expiry is a bound.
func (s *store) left(l leases.Lease, now int64, known bool) string {
	if !known {
		return "?"
	}
	return human(l.ExpiresAt-now, !l.Exact())
}

// human is a number of milliseconds in human units: 350ms, 8.2s, 1m30s.
func human(ms int64, bound bool) string {
	d := time.Duration(max(0, ms)) * time.Millisecond
	switch {
	case d < time.Second:
	case d < time.Minute:
		d = d.Round(100 * time.Millisecond)
	default:
		d = d.Round(time.Second)
	}
	if bound {
		return "at most " + d.String()
	}
	return d.String()
}

// stamp is a tick (milliseconds since the Unix epoch) as a time in loc,
// to the millisecond.
func stamp(ms int64, loc *time.Location) string {
	return time.UnixMilli(ms).In(loc).Format("2006-01-02T15:04:05.000Z07:00")
}

// onThisClock reports whether l's ticks are this machine's clock, so that
// its time left can be counted here: not a server's.
func onThisClock(l leases.Lease) bool {
	return l.Ticks == leases.HostMillis || l.Ticks == leases.LocalMillis
}
