package sqlite_test

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"leases"
	"leases/clock"
	"leases/internal/testctx"
)

// The Lessor lists the live leases on its own clock, as Holder sees them:
// a released lease and an expired one are left out, the named resources
// are answered in one transaction, and the tick it returns is the clock's,
// so that ExpiresAt-now is how long each lease has left. A store whose
// clock is behind the last change decides at the last change, as Holder
// does.
func TestLessorListsTheLiveLeases(t *testing.T) {
	ctx := testctx.Context(t)
	path := filepath.Join(t.TempDir(), "leases.db")
	host := clock.NewManual(1_000)
	lessor := lessorOn(t, path, host)
	lister, ok := lessor.(leases.Lister)
	if !ok {
		t.Fatalf("the Lessor (%T) is not a leases.Lister", lessor)
	}

	if live, now, err := lister.Live(ctx); err != nil || len(live) != 0 || now != 1_000 {
		t.Fatalf("an empty file: %v at %d, %v; want nothing at 1000", live, now, err)
	}
	acquire := func(resource, holder string, ttl time.Duration) leases.Lease {
		t.Helper()
		l, err := lessor.Acquire(ctx, resource, holder, ttl)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	c := acquire("c", "C", 500*time.Millisecond)
	a := acquire("a", "A", 100*time.Millisecond)
	released := acquire("b", "B", time.Second)
	if err := lessor.Release(ctx, released); err != nil {
		t.Fatal(err)
	}
	acquire("d", "D", 50*time.Millisecond) // expires at 1050
	if err := host.Advance(1_050); err != nil {
		t.Fatal(err)
	}

	live, now, err := lister.Live(ctx)
	if err != nil || now != 1_050 || !slices.Equal(live, []leases.Lease{a, c}) {
		t.Fatalf("every live lease at 1050: %+v at %d, %v; want a and c, in order", live, now, err)
	}
	for _, l := range live {
		if held, ok, err := lessor.Holder(ctx, l.Resource); err != nil || !ok || held != l {
			t.Fatalf("holder of %q: %+v, %v, %v; want the listed %+v", l.Resource, held, ok, err, l)
		}
	}
	named, _, err := lister.Live(ctx, "c", "b", "never", "d", "c")
	if err != nil || !slices.Equal(named, []leases.Lease{c}) {
		t.Fatalf("named c, b (released), never (never leased), d (expired), c again: %+v, %v; want c once", named, err)
	}

	// A store on a clock 500 ms behind decides at each row's last change:
	// a's lease, changed at 1000, is live there at 1000.
	behind := lessorOn(t, path, clock.NewManual(500)).(leases.Lister)
	if live, now, err := behind.Live(ctx, "a"); err != nil || now != 500 || !slices.Equal(live, []leases.Lease{a}) {
		t.Fatalf("on a clock behind: %+v at %d, %v; want a, read at 500", live, now, err)
	}

	for _, bad := range []string{"", string(make([]byte, leases.MaxNameBytes+1))} {
		if _, _, err := lister.Live(ctx, "a", bad); !errors.Is(err, leases.ErrInvalidInput) {
			t.Fatalf("a bad name among the named: %v; want ErrInvalidInput", err)
		}
	}
}
