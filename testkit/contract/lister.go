package contract

import (
	"context"
	"errors"
	"testing"
	"time"

	"leases"
)

// Lister checks the listing of lessor (its Live), on a store of
// its own whose clock is the lessor's: nothing at first; then, with a
// lease released and one expired, every live lease, in the byte order of
// the resources ("B-upper" before "b-lower", whatever a database's
// collation says), and the named ones (a free or never-leased one left
// out, a name given twice answered once), each as the lessor granted it
// (resource, holder, epoch) and expiring after the listing's tick; a bad
// name refused as invalid input. expire returns once the lease it is
// given has expired on the lessor's clock.
func Lister(t *testing.T, ctx context.Context, lessor leases.Lessor, expire func(leases.Lease)) {
	t.Helper()
	lister := lessor
	if live, _, err := lister.Live(ctx); err != nil || len(live) != 0 {
		t.Fatalf("nothing leased: %+v, %v; want nothing", live, err)
	}
	acquire := func(resource, holder string, ttl time.Duration) leases.Lease {
		t.Helper()
		l, err := lessor.Acquire(ctx, resource, holder, ttl)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	lower := acquire("b-lower", "L", time.Hour)
	upper := acquire("B-upper", "U", time.Hour)
	c := acquire("c/1", "C", time.Hour)
	if err := lessor.Release(ctx, acquire("released", "R", time.Hour)); err != nil {
		t.Fatal(err)
	}
	expire(acquire("expired", "E", time.Millisecond))

	check := func(what string, live []leases.Lease, now int64, err error, want ...leases.Lease) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		same := len(live) == len(want)
		for i := 0; same && i < len(live); i++ {
			l, w := live[i], want[i]
			same = l.Resource == w.Resource && l.Holder == w.Holder && l.Epoch == w.Epoch && l.ExpiresAt > now
		}
		if !same {
			t.Fatalf("%s: %+v at tick %d; want %+v in this order, each expiring after the tick", what, live, now, want)
		}
	}
	live, now, err := lister.Live(ctx)
	check("every live lease", live, now, err, upper, lower, c)
	live, now, err = lister.Live(ctx, "c/1", "released", "expired", "never", "b-lower", "c/1")
	check("the named leases", live, now, err, lower, c)
	for _, bad := range []string{"", string(make([]byte, leases.MaxNameBytes+1))} {
		if _, _, err := lister.Live(ctx, "c/1", bad); !errors.Is(err, leases.ErrInvalidInput) {
			t.Fatalf("a bad name among the named: %v; want ErrInvalidInput", err)
		}
	}
}
