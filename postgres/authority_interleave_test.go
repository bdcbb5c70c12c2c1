package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"

	"leases"
	"leases/internal/rules"
	"leases/postgres"
	"leases/testkit/fencetest"
)

// Every order of two READ COMMITTED decisions' statements on one lease
// row: begin, the locking read, the write (or the rollback of a refusal)
// and the commit, and again for a decision made anew after its first row
// lost a race. Each decision runs on a connection of its own; a statement
// that waits for the other decision's lock runs on in its goroutine while
// the schedule goes on with the other, whose end releases it. Checked for
// every schedule:
//   - each decision is what package rules decides on the row committed
//     when its locking read returned (for a read that waited: once the
//     other transaction ended), and it committed exactly when the rules
//     wrote;
//   - the committed row is the last committed decision's;
//   - no epoch is granted twice, and no two leases are live at one tick
//     (each lease's ticks running from its grant to its last committed
//     expiry, or its release).
func TestAuthorityInterleavingsReadCommitted(t *testing.T) {
	ctx := fencetest.Context(t)
	shared := database(t, 0).DB
	store := newStore(t, shared, postgres.Options{})
	monitor := database(t, 1).DB
	opts := postgres.Options{Isolation: sql.LevelReadCommitted}
	var sides [2]*side
	for i := range sides {
		db := database(t, 1).DB
		sides[i] = &side{store: sameStore(t, store, db, opts)}
		if err := db.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&sides[i].pid); err != nil {
			t.Fatal(err)
		}
	}
	x := leases.Lease{Holder: "X", Epoch: 1} // the setup's lease, granted at tick 0 for setupTTL ticks
	scenarios := []struct {
		name     string
		setupTTL int64 // 0: no setup, the resource has no row
		ops      [2]op
	}{
		{"two first acquires", 0, [2]op{acquire("A", 0, 10), acquire("B", 0, 10)}},
		{"two acquires at the expiry", 5, [2]op{acquire("A", 5, 10), acquire("B", 5, 10)}},
		{"an acquire against a renewal", 5, [2]op{renew(x, 4, 10), acquire("B", 5, 10)}},
		{"an acquire against a release", 10, [2]op{release(x, 3), acquire("B", 3, 10)}},
		{"a renewal against a release", 10, [2]op{renew(x, 3, 10), release(x, 3)}},
	}
	schedules, blocked, retried := 0, 0, 0
	for _, sc := range scenarios {
		var prefix []int
		for {
			resource := fmt.Sprintf("%s #%d", sc.name, schedules)
			var setup []leases.Lease
			if sc.setupTTL > 0 {
				lease, err := store.Authority().Acquire(ctx, resource, "X", 0, sc.setupTTL)
				if err != nil {
					t.Fatal(err)
				}
				setup = append(setup, lease)
			}
			s := &interleaving{t: t, ctx: ctx, monitor: monitor, table: store.Tables()[0], resource: resource, prefix: prefix}
			s.run(sides, sc.ops)
			s.check(setup)
			schedules++
			if s.blocked {
				blocked++
			}
			if s.retried {
				retried++
			}
			if t.Failed() {
				t.Fatalf("%s:\n%s", resource, strings.Join(s.log, "\n"))
			}
			var more bool
			if prefix, more = s.next(); !more {
				break
			}
		}
	}
	t.Logf("%d schedules; in %d a statement waited for the other transaction, in %d a first row lost its race and was decided again",
		schedules, blocked, retried)
	if blocked == 0 || retried == 0 {
		t.Error("the schedules do not exercise the row lock, or the race of two first rows")
	}
}

// side is one of the two connections the decisions run on.
type side struct {
	store *postgres.Store
	pid   int
}

// op is one decision, by name, with what the rules would decide on a
// row.
type op struct {
	name   string
	grants bool // an acquire
	call   func(ctx context.Context, a *postgres.Authority, resource string) (leases.Lease, error)
	decide func(row rules.LeaseRow, found bool, resource string) (rules.LeaseRow, leases.Lease, error)
}

func acquire(holder string, now, ttl int64) op {
	return op{
		name: fmt.Sprintf("acquire by %s at %d", holder, now), grants: true,
		call: func(ctx context.Context, a *postgres.Authority, resource string) (leases.Lease, error) {
			return a.Acquire(ctx, resource, holder, now, ttl)
		},
		decide: func(row rules.LeaseRow, found bool, resource string) (rules.LeaseRow, leases.Lease, error) {
			return rules.Acquire(row, found, resource, holder, now, ttl)
		},
	}
}

func renew(held leases.Lease, now, ttl int64) op {
	return op{
		name: fmt.Sprintf("renewal by %s at %d", held.Holder, now),
		call: func(ctx context.Context, a *postgres.Authority, resource string) (leases.Lease, error) {
			held.Resource = resource
			return a.Renew(ctx, held, now, ttl)
		},
		decide: func(row rules.LeaseRow, found bool, resource string) (rules.LeaseRow, leases.Lease, error) {
			held.Resource = resource
			return rules.Renew(row, found, held, now, ttl)
		},
	}
}

func release(held leases.Lease, now int64) op {
	return op{
		name: fmt.Sprintf("release by %s at %d", held.Holder, now),
		call: func(ctx context.Context, a *postgres.Authority, resource string) (leases.Lease, error) {
			held.Resource = resource
			return leases.Lease{}, a.Release(ctx, held, now)
		},
		decide: func(row rules.LeaseRow, found bool, resource string) (rules.LeaseRow, leases.Lease, error) {
			held.Resource = resource
			next, err := rules.Release(row, found, held, now)
			return next, leases.Lease{}, err
		},
	}
}

// decision is one decision of a schedule, running in a goroutine of its
// own, held by its hook before each step.
type decision struct {
	name    string
	side    *side
	op      op
	arrive  chan string   // the step it is about to take
	proceed chan struct{} // lets it take that step
	done    chan struct{} // closed when the call returned
	lease   leases.Lease
	err     error
	at      string // the step it waits at; "" while a step runs, or once done
	step    string // the step that runs
	blocked bool   // its step waits for the other transaction's lock
	// saw is the committed row when its (last) locking read returned.
	saw      *leaseRow
	commitAt int // its place in the order of commits; 0: it did not commit
}

// leaseRow is the committed lease row, as the monitor reads it.
type leaseRow struct {
	row   rules.LeaseRow
	found bool
}

type interleaving struct {
	t        *testing.T
	ctx      context.Context
	monitor  *sql.DB
	table    string
	resource string
	ds       [2]*decision
	commits  int
	// The schedule's choices: prefix is replayed, then the first choice
	// is taken; taken and options record each choice point.
	prefix, taken, options []int
	blocked, retried       bool
	log                    []string
}

// run plays one schedule to its end.
func (s *interleaving) run(sides [2]*side, ops [2]op) {
	for i := range s.ds {
		d := &decision{name: string(rune('A' + i)), side: sides[i], op: ops[i],
			arrive: make(chan string), proceed: make(chan struct{}), done: make(chan struct{})}
		s.ds[i] = d
		ctx := postgres.WithStep(s.ctx, func(step string) {
			d.arrive <- step
			<-d.proceed
		})
		go func() {
			defer close(d.done)
			d.lease, d.err = d.op.call(ctx, d.side.store.Authority(), s.resource)
		}()
		s.settle(d)
	}
	defer s.abandon()
	for {
		var ready []*decision
		for _, d := range s.ds {
			if d.at != "" {
				ready = append(ready, d)
			}
		}
		if len(ready) == 0 {
			break
		}
		d := ready[s.choose(len(ready))]
		d.step, d.at = d.at, ""
		if d.step == "begin" && d.saw != nil {
			s.retried = true
		}
		d.proceed <- struct{}{}
		s.settle(d)
	}
	for _, d := range s.ds {
		select {
		case <-d.done:
		default:
			s.t.Errorf("%s did not finish: it waits at %q, blocked %v", d.name, d.at, d.blocked)
		}
	}
}

// settle waits until d has taken its step: it arrived at its next step,
// or returned, or its statement waits for the other transaction's lock.
// When d's step ended its transaction, the other decision, if it waited,
// now takes its step too.
func (s *interleaving) settle(d *decision) {
	for {
		select {
		case next := <-d.arrive:
			s.took(d, next)
			return
		case <-d.done:
			s.took(d, "")
			return
		default:
		}
		var waits bool
		if err := s.monitor.QueryRowContext(s.ctx, `SELECT cardinality(pg_blocking_pids($1)) > 0`, d.side.pid).Scan(&waits); err != nil {
			s.t.Fatal(err)
		}
		if waits {
			d.blocked, s.blocked = true, true
			s.logf("%s %s waits for the other transaction", d.name, d.step)
			return
		}
	}
}

// took records that d's step is done and it now waits at next ("" once
// it returned), and lets a decision that waited for d's transaction go
// on once d's transaction ended.
func (s *interleaving) took(d *decision, next string) {
	committed := s.read()
	switch d.step {
	case "lock":
		d.saw = &committed
	case "commit":
		s.commits++
		d.commitAt = s.commits
	}
	d.blocked, d.at = false, next
	s.logf("%s %s done; the committed row is %+v (found %v)", d.name, d.step, committed.row, committed.found)
	if d.step == "commit" || d.step == "rollback" {
		for _, other := range s.ds {
			if other.blocked {
				other.blocked = false
				select {
				case next := <-other.arrive:
					s.took(other, next)
				case <-other.done:
					s.took(other, "")
				case <-s.ctx.Done():
					s.t.Fatalf("%s %s still waits after the other transaction ended", other.name, other.step)
				}
			}
		}
	}
	if next == "" {
		s.logf("%s returned %+v, %v", d.name, d.lease, d.err)
	}
}

// choose picks one of n ready decisions: the prefix's choice, then the
// first.
func (s *interleaving) choose(n int) int {
	if n == 1 {
		return 0
	}
	c := 0
	if len(s.taken) < len(s.prefix) {
		c = s.prefix[len(s.taken)]
	}
	s.taken, s.options = append(s.taken, c), append(s.options, n)
	return c
}

// next is the prefix of the next schedule, in depth-first order; false
// when every schedule has run.
func (s *interleaving) next() ([]int, bool) {
	for i := len(s.taken) - 1; i >= 0; i-- {
		if s.taken[i]+1 < s.options[i] {
			return append(append([]int{}, s.taken[:i]...), s.taken[i]+1), true
		}
	}
	return nil, false
}

// abandon lets what a failed schedule left waiting run to its end.
func (s *interleaving) abandon() {
	for _, d := range s.ds {
		if d == nil {
			continue
		}
		if d.at != "" {
			d.proceed <- struct{}{}
		}
		for {
			select {
			case <-d.arrive:
				d.proceed <- struct{}{}
				continue
			case <-d.done:
			}
			break
		}
	}
}

// read returns the committed lease row.
func (s *interleaving) read() leaseRow {
	var r leaseRow
	var holder sql.NullString
	err := s.monitor.QueryRowContext(s.ctx, `SELECT epoch, holder, granted_at, expires_at, last_tick FROM "`+s.table+`" WHERE resource = $1`,
		s.resource).Scan(&r.row.Epoch, &holder, &r.row.GrantedAt, &r.row.ExpiresAt, &r.row.LastTick)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return leaseRow{}
	case err != nil:
		s.t.Fatal(err)
	}
	r.found, r.row.Holder, r.row.Held = true, holder.String, holder.Valid
	return r
}

// check holds the schedule's outcome to the rules.
func (s *interleaving) check(setup []leases.Lease) {
	t := s.t
	granted := append([]leases.Lease{}, setup...)
	// ends are the ticks at which each epoch stops being live, as the
	// committed decisions left it: the grant's expiry, a renewal's, or a
	// release's tick.
	ends := map[int64]int64{}
	for _, l := range setup {
		ends[l.Epoch] = l.ExpiresAt
	}
	wrote := make([]*rules.LeaseRow, len(s.ds)+1) // by place in the order of commits
	for _, d := range s.ds {
		if d.saw == nil {
			t.Errorf("%s never read the row", d.name)
			continue
		}
		next, lease, err := d.op.decide(d.saw.row, d.saw.found, s.resource)
		if kind(d.err) != kind(err) || d.lease != lease {
			t.Errorf("%s (%s): %+v, %v; the rules over the committed row %+v (found %v) say %+v, %v",
				d.name, d.op.name, d.lease, d.err, d.saw.row, d.saw.found, lease, err)
		}
		if (d.commitAt > 0) != (err == nil) {
			t.Errorf("%s committed %v, yet the rules wrote %v", d.name, d.commitAt > 0, err == nil)
		}
		if d.commitAt > 0 {
			wrote[d.commitAt] = &next
		}
		if d.err == nil && d.op.grants {
			granted = append(granted, d.lease)
		}
	}
	var last *rules.LeaseRow
	for _, row := range wrote {
		if row != nil {
			ends[row.Epoch], last = row.ExpiresAt, row
		}
	}
	committed := s.read()
	if last != nil && (!committed.found || committed.row != *last) {
		t.Errorf("the committed row is %+v; the last committed decision wrote %+v", committed.row, *last)
	}
	for i, a := range granted {
		for _, b := range granted[i+1:] {
			if a.Epoch == b.Epoch {
				t.Errorf("epoch %d granted twice: %+v and %+v", a.Epoch, a, b)
			}
			if a.GrantedAt < ends[b.Epoch] && b.GrantedAt < ends[a.Epoch] {
				t.Errorf("%+v (until %d) and %+v (until %d) are live at once", a, ends[a.Epoch], b, ends[b.Epoch])
			}
		}
	}
}

// kind names the sentinel an error matches, for comparing a decision's
// error with the rules'.
func kind(err error) string {
	for _, sentinel := range []error{leases.ErrLeaseHeld, leases.ErrNotHolder, leases.ErrLeaseExpired, leases.ErrTickBackwards, leases.ErrInvalidInput} {
		if errors.Is(err, sentinel) {
			return sentinel.Error()
		}
	}
	if err != nil {
		return "failure: " + err.Error()
	}
	return "none"
}

func (s *interleaving) logf(format string, args ...any) {
	s.log = append(s.log, fmt.Sprintf(format, args...))
}
