package session_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"leases"
	"leases/session"
	"leases/testkit/testctx"
)

// doubtful is a lessor whose acquires have an unknown outcome, one per
// call while unknown is above zero: the acquire takes effect or not
// (granted), and the caller's context ends meanwhile (end), as when a
// commit is cut off on its way. Its releases fail while failReleases is
// above zero, without a refusal. It keeps the context each release ran
// under.
type doubtful struct {
	leases.Lessor
	end     context.CancelCauseFunc
	granted bool

	mu           sync.Mutex
	unknown      int
	failReleases int
	releases     []releaseCall
}

// releaseCall is what a release's context was when the release began.
type releaseCall struct {
	ended    bool
	deadline time.Time
	bounded  bool
}

// errUnreachable is the failure of doubtful's releases.
var errUnreachable = errors.New("connection refused")

func (l *doubtful) Acquire(ctx context.Context, resource, holder string, ttl time.Duration) (leases.Lease, error) {
	l.mu.Lock()
	doubt := l.unknown > 0
	l.unknown--
	l.mu.Unlock()
	if !doubt {
		return l.Lessor.Acquire(ctx, resource, holder, ttl)
	}
	wouldBe := leases.Lease{Resource: resource, Holder: holder, Epoch: 1, ExpiresAt: ttl.Milliseconds()}
	if l.granted {
		var err error
		if wouldBe, err = l.Lessor.Acquire(ctx, resource, holder, ttl); err != nil {
			return leases.Lease{}, err
		}
	}
	l.end(errors.New("the caller gave up during the commit"))
	// As a lessor says it (package internal/outcome): the context's
	// end and its cause.
	return wouldBe, fmt.Errorf("commit: %w: %w (%w)", leases.ErrOutcomeUnknown, ctx.Err(), context.Cause(ctx))
}

// releaseCount is how many releases have begun.
func (l *doubtful) releaseCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.releases)
}

func (l *doubtful) Release(ctx context.Context, held leases.Lease) error {
	l.mu.Lock()
	deadline, bounded := ctx.Deadline()
	l.releases = append(l.releases, releaseCall{ended: ctx.Err() != nil, deadline: deadline, bounded: bounded})
	fail := l.failReleases > 0
	l.failReleases--
	l.mu.Unlock()
	if fail {
		return fmt.Errorf("release: %w", errUnreachable)
	}
	return l.Lessor.Release(ctx, held)
}

// An acquire whose outcome is unknown is never dropped: whatever the
// context did meanwhile, Start, Wait, Do and Lead release the lease it
// may have granted, within a bound of their own once the context has
// ended, and return an *OutcomeError saying whether it may still be held.
// None of them reports it as a plain context error, and Do and Lead do
// not run the work.
func TestAnUnknownOutcomeIsNeverDropped(t *testing.T) {
	calls := []struct {
		name string
		call func(ctx context.Context, lessor leases.Lessor, opts session.Options, ran *bool) error
	}{
		{"Start", func(ctx context.Context, lessor leases.Lessor, opts session.Options, ran *bool) error {
			_, err := session.Start(ctx, lessor, "r", "A", opts)
			return err
		}},
		{"Wait", func(ctx context.Context, lessor leases.Lessor, opts session.Options, ran *bool) error {
			_, err := session.Wait(ctx, lessor, "r", "A", opts)
			return err
		}},
		{"Do", func(ctx context.Context, lessor leases.Lessor, opts session.Options, ran *bool) error {
			return session.Do(ctx, lessor, "r", "A", opts, func(context.Context, *session.Session) error {
				*ran = true
				return nil
			})
		}},
		{"Lead", func(ctx context.Context, lessor leases.Lessor, opts session.Options, ran *bool) error {
			return session.Lead(ctx, lessor, "r", "A", opts, session.Leader{
				OnStarted: func(context.Context, *session.Session) { *ran = true },
			})
		}},
	}
	outcomes := []struct {
		name                  string
		granted, releaseFails bool
		released              bool // what the error must say
	}{
		{"granted, released", true, false, true},
		{"granted, the release failed", true, true, false},
		{"never granted, the release refused", false, false, true},
		{"never granted, the release failed", false, true, false},
	}
	for _, c := range calls {
		for _, o := range outcomes {
			t.Run(c.name+"/"+o.name, func(t *testing.T) {
				b := newBench(t)
				ctx, end := context.WithCancelCause(b.ctx)
				lessor := &doubtful{Lessor: b.lessor, end: end, granted: o.granted, unknown: 1}
				if o.releaseFails {
					lessor.failReleases = 1 << 10
				}
				bound := testctx.Bound(t) // never fires on a slow but working run
				opts := session.Options{TTL: 10 * tick, Clock: b.clk, CloseTimeout: bound}
				ran := false
				err := c.call(ctx, lessor, opts, &ran)
				var unknown *session.OutcomeError
				switch {
				case !errors.As(err, &unknown):
					t.Fatalf("%s: %v; want an *OutcomeError", c.name, err)
				case !errors.Is(err, leases.ErrOutcomeUnknown) || !errors.Is(err, context.Canceled):
					t.Fatalf("%s: %v; want ErrOutcomeUnknown and the context's end", c.name, err)
				case unknown.Released != o.released || unknown.Lease.Epoch != 1 || unknown.Lease.Holder != "A":
					t.Fatalf("%s: released %v, lease %+v; want released %v, epoch 1 of A: %v",
						c.name, unknown.Released, unknown.Lease, o.released, err)
				case (unknown.ReleaseErr == nil) != o.released:
					t.Fatalf("%s: ReleaseErr %v with released %v", c.name, unknown.ReleaseErr, unknown.Released)
				case ran:
					t.Fatalf("%s ran its work with no lease", c.name)
				}
				_, live, err := b.auth.Lease(b.ctx, "r", 0)
				if err != nil {
					t.Fatal(err)
				}
				if want := o.granted && o.releaseFails; live != want {
					t.Fatalf("%s: the lease is live afterwards: %v; want %v (the error says %v)", c.name, live, want, unknown)
				}
				lessor.mu.Lock()
				defer lessor.mu.Unlock()
				if len(lessor.releases) == 0 {
					t.Fatalf("%s: no release was tried", c.name)
				}
				for _, r := range lessor.releases {
					if r.ended || !r.bounded || time.Until(r.deadline) > bound {
						t.Fatalf("%s: a release under a context that had ended, or beyond CloseTimeout: %+v", c.name, r)
					}
				}
			})
		}
	}
}

// A grant whose answer comes back after the session's deadline is
// released by Wait; a release that fails is neither dropped nor
// forgotten: Wait tries it again, after a backoff, before anything else,
// and if its context ends first it returns an *OutcomeError naming the
// lease that may still be live.
func TestWaitNeverDropsALateGrantItCouldNotRelease(t *testing.T) {
	for _, recovers := range []bool{false, true} {
		name := map[bool]string{false: "the release keeps failing", true: "the second release succeeds"}[recovers]
		t.Run(name, func(t *testing.T) {
			b := newBench(t)
			ctx, end := context.WithCancelCause(b.ctx)
			lessor := &doubtful{Lessor: &slowGrant{Lessor: b.lessor, clk: b.clk, late: 9}, end: end, failReleases: 1 << 10}
			if recovers {
				lessor.failReleases = 1
			}
			opts := session.Options{TTL: 10 * tick, Margin: 2 * tick, Clock: b.clk, CloseTimeout: testctx.Bound(t)}
			results := make(chan result, 1)
			go func() {
				s, err := session.Wait(ctx, lessor, "r", "B", opts)
				results <- result{s, err}
			}()
			var got <-chan result = results
			if recovers {
				// The late grant's release failed; Wait backs off, releases
				// it, and is granted anew. The clock moves only until the
				// release is tried again: from then on Wait needs no tick,
				// and the new session's own goroutines wait on the clock,
				// which moving on would run past its deadline before Wait
				// has returned (a loaded machine did).
				for tick := int64(10); lessor.releaseCount() < 2; tick++ {
					if r, returned := b.waitersOrResult(got, 1); returned {
						got = resultAgain(r)
						break
					}
					if err := b.clk.Advance(tick); err != nil {
						t.Fatal(err)
					}
				}
				r := b.result(got)
				if r.err != nil {
					t.Fatalf("Wait: %v; want a live session at epoch 2", r.err)
				}
				if lease, err := r.s.Lease(), r.s.Check(); lease.Epoch != 2 || err != nil {
					t.Fatalf("Wait: %+v, checking %v; want a live session at epoch 2", lease, err)
				}
				t.Cleanup(func() { _ = r.s.Close(context.Background()) })
				if n := len(lessor.releases); n != 2 {
					t.Fatalf("%d releases; want 2: the failed one and its retry", n)
				}
				return
			}
			// Wait backs off after the failed release, on the clock.
			if r, returned := b.waitersOrResult(got, 1); returned {
				t.Fatalf("Wait returned before its context ended: %+v, %v", r.s, r.err)
			}
			end(errors.New("the caller gave up"))
			err := b.result(got).err
			var unknown *session.OutcomeError
			if !errors.As(err, &unknown) || !errors.Is(err, context.Canceled) || unknown.Released ||
				unknown.Lease.Epoch != 1 || unknown.Lease.GrantedAt != 0 || unknown.ReleaseErr == nil {
				t.Fatalf("Wait: %v; want an *OutcomeError naming epoch 1, not released, and the context's end", err)
			}
			if _, live, err := b.auth.Lease(b.ctx, "r", 9); err != nil || !live {
				t.Fatalf("the late grant at tick 9: live %v, %v; the error says it may be held", live, err)
			}
			if n := len(lessor.releases); n < 3 {
				t.Fatalf("%d releases; want the late grant's, one after the backoff, and one within the bound", n)
			}
		})
	}
}

// Lead whose last tenure's release fails says so when its context has
// ended, besides the context's end: the lease may still be live.
func TestLeadReportsAFailedLastRelease(t *testing.T) {
	b := newBench(t)
	ctx, stop := context.WithCancel(b.ctx)
	lessor := &doubtful{Lessor: b.lessor, failReleases: 1 << 10}
	err := session.Lead(ctx, lessor, "r", "A", session.Options{TTL: 10 * tick, Clock: b.clk, CloseTimeout: testctx.Bound(t)},
		session.Leader{OnStarted: func(context.Context, *session.Session) { stop() }})
	if !errors.Is(err, context.Canceled) || !errors.Is(err, errUnreachable) {
		t.Fatalf("Lead: %v; want the context's end and the failed release", err)
	}
}

// While its context lives, Wait releases what an acquire with an unknown
// outcome may have granted before it tries again: a grant that took
// effect is not left to run out under the holder's name, with Wait
// itself, refused by it, waiting for it to expire.
func TestWaitReleasesWhatAnUnknownOutcomeMayHaveGranted(t *testing.T) {
	b := newBench(t)
	lessor := &doubtful{Lessor: b.lessor, end: func(error) {}, granted: true, unknown: 1}
	opts := session.Options{TTL: 100 * tick, Clock: b.clk}
	got := b.waitIn(lessor, "A", opts)
	for tick := int64(1); ; tick++ {
		if r, returned := b.waitersOrResult(got, 1); returned {
			got = resultAgain(r)
			break
		}
		if tick >= 100 {
			t.Fatal("Wait waited for the lease its own unknown outcome had granted to expire")
		}
		if err := b.clk.Advance(tick); err != nil {
			t.Fatal(err)
		}
	}
	r := b.result(got)
	if r.err != nil || r.s.Epoch() != 2 || r.s.Lease().GrantedAt >= 100 {
		t.Fatalf("Wait: %+v, %v; want epoch 2, granted before epoch 1 could expire", r.s, r.err)
	}
	if n := len(lessor.releases); n != 1 {
		t.Fatalf("%d releases; want the release of epoch 1", n)
	}
}
