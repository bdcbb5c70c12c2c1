package session_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"leases"
	"leases/clock"
	"leases/internal/testctx"
	"leases/session"
	"leases/sqlite"
)

func newAuthority(t *testing.T) (*sqlite.Store, leases.Authority) {
	t.Helper()
	store, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "leases.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	return store, store.Authority()
}

// advance moves clk to tick and returns once waiters goroutines wait on
// the clock again: whatever the move set off has run.
func advance(t *testing.T, ctx context.Context, clk *clock.Manual, tick int64, waiters int) {
	t.Helper()
	if err := clk.Advance(tick); err != nil {
		t.Fatal(err)
	}
	if err := clk.Waiters(ctx, waiters); err != nil {
		t.Fatalf("waiting for %d goroutines to wait on the clock at tick %d: %v", waiters, tick, err)
	}
}

// The session renews RenewAfter ticks after each confirmed renewal, keeps
// its epoch, and its deadline follows the last confirmed expiry.
func TestSessionRenewsOnSchedule(t *testing.T) {
	ctx := testctx.Context(t)
	_, auth := newAuthority(t)
	clk := clock.NewManual(0)
	s, err := session.Start(ctx, auth, clk, "r", "A", session.Options{TTL: 10, Margin: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	if err := clk.Waiters(ctx, 1); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		tick         int64
		wantExpiry   int64
		wantDeadline int64
	}{
		{3, 10, 8},  // before RenewAfter = (10-2)/2 = 4: nothing happens
		{4, 14, 12}, // renewed at 4
		{7, 14, 12},
		{8, 18, 16}, // renewed at 8
		{15, 25, 23},
	}
	for _, step := range steps {
		advance(t, ctx, clk, step.tick, 1)
		if got := s.Lease(); got.Epoch != 1 || got.ExpiresAt != step.wantExpiry || s.Deadline() != step.wantDeadline {
			t.Fatalf("at tick %d: lease %+v, deadline %d; want epoch 1 expiring at %d, deadline %d",
				step.tick, got, s.Deadline(), step.wantExpiry, step.wantDeadline)
		}
		if err := s.Check(); err != nil {
			t.Fatalf("at tick %d: %v", step.tick, err)
		}
	}
	if _, err := auth.Acquire(ctx, "r", "B", 24, 10); !errors.Is(err, leases.ErrLeaseHeld) {
		t.Fatalf("another holder before the renewed expiry: %v; want ErrLeaseHeld", err)
	}
}

// When renewals fail, Done closes at the deadline, the margin before the
// expiry tick at which another holder is granted, and never later.
func TestSessionEndsBeforeTheNextGrant(t *testing.T) {
	cases := []struct {
		name string
		// breakRenewals makes every renewal from now on fail, or be refused.
		breakRenewals func(t *testing.T, store *sqlite.Store, s *session.Session)
		wantEndAt     int64 // the tick at which Done must be closed
	}{
		{"the store is gone: renewals fail until the deadline", func(t *testing.T, store *sqlite.Store, _ *session.Session) {
			if err := store.Close(); err != nil {
				t.Fatal(err)
			}
		}, 8},
		{"the lease was released: the next renewal is refused", func(t *testing.T, store *sqlite.Store, s *session.Session) {
			if err := store.Authority().Release(context.Background(), s.Lease(), 1); err != nil {
				t.Fatal(err)
			}
		}, 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testctx.Context(t)
			store, auth := newAuthority(t)
			clk := clock.NewManual(0)
			s, err := session.Start(ctx, auth, clk, "r", "A", session.Options{TTL: 10, Margin: 2})
			if err != nil {
				t.Fatal(err)
			}
			if err := clk.Waiters(ctx, 1); err != nil {
				t.Fatal(err)
			}
			tc.breakRenewals(t, store, s)
			for tick := int64(1); tick < tc.wantEndAt; tick++ {
				advance(t, ctx, clk, tick, 1)
				select {
				case <-s.Done():
					t.Fatalf("Done closed at tick %d, before %d: %v", tick, tc.wantEndAt, s.Err())
				default:
				}
			}
			if err := clk.Advance(tc.wantEndAt); err != nil {
				t.Fatal(err)
			}
			select {
			case <-s.Done():
			case <-ctx.Done():
				t.Fatalf("Done still open at tick %d", tc.wantEndAt)
			}
			if err := s.Check(); !errors.Is(err, session.ErrEnded) {
				t.Fatalf("Check after the end: %v; want ErrEnded", err)
			}
		})
	}
}

// A process paused past its deadline learns it from Check at once, even
// before the renewal goroutine has run.
func TestSessionCheckReadsTheClockItself(t *testing.T) {
	ctx := testctx.Context(t)
	_, auth := newAuthority(t)
	clk := clock.NewManual(0)
	s, err := session.Start(ctx, auth, clk, "r", "A", session.Options{TTL: 10, Margin: 2, RenewAfter: 100})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Check(); err != nil {
		t.Fatalf("at tick 0: %v", err)
	}
	if err := clk.Advance(8); err != nil { // the whole pause at once
		t.Fatal(err)
	}
	if err := s.Check(); !errors.Is(err, session.ErrEnded) {
		t.Fatalf("Check at the deadline: %v; want ErrEnded", err)
	}
	<-s.Done()
}

// A waiting acquire is granted exactly at the live lease's expiry tick, or
// right after its release, and never earlier.
func TestWaitIsGrantedAtExpiryOrRelease(t *testing.T) {
	for _, released := range []bool{false, true} {
		name := map[bool]string{false: "at the expiry tick", true: "right after a release"}[released]
		t.Run(name, func(t *testing.T) {
			ctx := testctx.Context(t)
			_, auth := newAuthority(t)
			clk := clock.NewManual(0)
			a, err := session.Start(ctx, auth, clk, "r", "A", session.Options{TTL: 5, Margin: 1, RenewAfter: 100})
			if err != nil {
				t.Fatal(err)
			}
			type result struct {
				s   *session.Session
				err error
			}
			got := make(chan result, 1)
			go func() {
				s, err := session.Wait(ctx, auth, clk, "r", "B", session.Options{TTL: 5, Margin: 1})
				got <- result{s, err}
			}()
			if err := clk.Waiters(ctx, 2); err != nil { // A's renewal, B's wait
				t.Fatal(err)
			}
			advance(t, ctx, clk, 2, 2)
			select {
			case r := <-got:
				t.Fatalf("B was granted at tick 2, while A's lease is live until 5: %+v, %v", r.s.Lease(), r.err)
			default:
			}
			want := int64(5)
			if released {
				want = 2
				if err := a.Close(ctx); err != nil {
					t.Fatal(err)
				}
			} else if err := clk.Advance(5); err != nil {
				t.Fatal(err)
			}
			var r result
			select {
			case r = <-got:
			case <-ctx.Done():
				t.Fatal("B was not granted")
			}
			if r.err != nil || r.s.Lease().GrantedAt != want || r.s.Epoch() != 2 {
				t.Fatalf("B: %+v, %v; want epoch 2 granted at tick %d", r.s, r.err, want)
			}
			_ = r.s.Close(ctx)
		})
	}
}

// renewFails is an authority whose renewals fail with err: the store as a
// session sees it after an unknown outcome (SQLite then refuses every call
// until it is reopened) or once its file was moved.
type renewFails struct {
	leases.Authority
	err error
}

func (a renewFails) Renew(context.Context, leases.Lease, int64, int64) (leases.Lease, error) {
	return leases.Lease{}, a.err
}

// A store that can renew no more ends the session at its first failed
// renewal, rather than being tried every tick until the deadline.
func TestSessionEndsWhenTheStoreCanRenewNoMore(t *testing.T) {
	for _, cause := range []error{leases.ErrReopenRequired, leases.ErrDatabaseMoved} {
		t.Run(cause.Error(), func(t *testing.T) {
			ctx := testctx.Context(t)
			_, auth := newAuthority(t)
			clk := clock.NewManual(0)
			s, err := session.Start(ctx, renewFails{auth, fmt.Errorf("renew: %w", cause)}, clk, "r", "A", session.Options{TTL: 10, Margin: 2})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close(context.Background()) })
			advance(t, ctx, clk, 3, 1)
			if err := s.Check(); err != nil {
				t.Fatalf("before the first renewal: %v", err)
			}
			if err := clk.Advance(4); err != nil { // RenewAfter = (10-2)/2
				t.Fatal(err)
			}
			select {
			case <-s.Done():
			case <-ctx.Done():
				t.Fatal("Done still open after a renewal that can never succeed")
			}
			if err := s.Err(); !errors.Is(err, session.ErrEnded) || !errors.Is(err, cause) {
				t.Fatalf("ended with %v; want ErrEnded and %v", err, cause)
			}
		})
	}
}
