package leasestest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"leases"
)

// checkLessor: the lessor's life of a lease, on its own clock: a grant
// with epoch 1, a second acquire refused with the live lease, a renewal
// under the same epoch that never moves the expiry earlier, a release
// that a waiter on Changed learns of, after which the released lease is
// no longer its holder's (ErrNotHolder, or ErrLeaseExpired from a store
// that forgets a lease when it ends, as etcd does, and cannot tell a
// release from an expiry) and the next grant has a new epoch. Every
// refusal changes nothing.
func checkLessor(ctx context.Context, b Backend) error {
	l := b.Lessor
	a, err := l.Acquire(ctx, "r", "A", time.Hour)
	if err != nil || a.Resource != "r" || a.Holder != "A" || a.Epoch != 1 || a.ExpiresAt <= a.GrantedAt {
		return fmt.Errorf("acquire: %+v, %v; want A's lease on r, epoch 1, expiring after its grant", a, err)
	}
	if err := refused(ctx, b, "a second acquire", func() error {
		_, err := l.Acquire(ctx, "r", "B", time.Hour)
		var h *leases.HeldError
		if errors.As(err, &h) && (h.Live.Epoch != a.Epoch || h.Live.Holder != "A") {
			return fmt.Errorf("%w, with the live lease %+v; want A's", err, h.Live)
		}
		return err
	}, leases.ErrLeaseHeld); err != nil {
		return err
	}
	if got, ok, err := l.Lease(ctx, "r"); err != nil || !ok || got.Holder != "A" || got.Epoch != a.Epoch {
		return fmt.Errorf("lease of r: %+v, %v, %v; want A's", got, ok, err)
	}
	renewed, err := l.Renew(ctx, a, time.Hour)
	if err != nil || renewed.Epoch != a.Epoch || renewed.Holder != "A" || renewed.ExpiresAt < a.ExpiresAt {
		return fmt.Errorf("renew: %+v, %v; want A's lease, epoch %d, expiring no earlier than %d", renewed, err, a.Epoch, a.ExpiresAt)
	}
	if err := releaseWakes(ctx, l, renewed); err != nil {
		return err
	}
	if got, ok, err := l.Lease(ctx, "r"); err != nil || ok {
		return fmt.Errorf("lease of r after its release: %+v, %v, %v; want none", got, ok, err)
	}
	for what, call := range map[string]func() error{
		"a second release":          func() error { return l.Release(ctx, renewed) },
		"a renewal after a release": func() error { _, err := l.Renew(ctx, renewed, time.Hour); return err },
	} {
		if err := refused(ctx, b, what, call, leases.ErrNotHolder, leases.ErrLeaseExpired); err != nil {
			return err
		}
	}
	if next, err := l.Acquire(ctx, "r", "B", time.Hour); err != nil || next.Epoch != a.Epoch+1 {
		return fmt.Errorf("acquire after the release: %+v, %v; want B's lease with epoch %d", next, err, a.Epoch+1)
	}
	return nil
}

// releaseWakes releases held with a waiter on its resource's Changed,
// and is an error unless the waiter learns of it before ctx ends.
func releaseWakes(ctx context.Context, l leases.Lessor, held leases.Lease) error {
	watch, stop := context.WithCancel(ctx)
	defer stop()
	changed, err := l.Changed(watch, held.Resource)
	if err != nil {
		return fmt.Errorf("changed: %w", err)
	}
	if err := l.Release(ctx, held); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	select {
	case <-changed:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("a waiter on Changed never learnt of the release: %w", context.Cause(ctx))
	}
}

// refused is an error unless call is a refusal matching one of want that
// changes nothing.
func refused(ctx context.Context, b Backend, what string, call func() error, want ...error) error {
	before, err := snapshot(ctx, b)
	if err != nil {
		return err
	}
	err = call()
	if !slices.ContainsFunc(want, func(w error) bool { return errors.Is(err, w) }) || !leases.IsRefusal(err) {
		return fmt.Errorf("%s: %v; want a refusal matching one of %v", what, err, want)
	}
	return unchanged(ctx, b, before, what)
}

// checkListing: nothing at first; then, with a lease released and one
// expired (where the backend can make it expire), every live lease, in
// the byte order of the resources ("B-upper" before "b-lower", whatever a
// database's collation says), and the named ones (a free or never-leased
// one left out, a name given twice answered once), each as the lessor
// granted it and expiring after the listing's tick; a bad name refused as
// invalid input.
func checkListing(ctx context.Context, b Backend) error {
	l := b.Lessor
	if live, _, err := l.Live(ctx); err != nil || len(live) != 0 {
		return fmt.Errorf("nothing leased: %+v, %v; want nothing", live, err)
	}
	leased := map[string]leases.Lease{}
	for _, g := range []struct{ resource, holder string }{{"b-lower", "L"}, {"B-upper", "U"}, {"c/1", "C"}, {"released", "R"}} {
		lease, err := l.Acquire(ctx, g.resource, g.holder, time.Hour)
		if err != nil {
			return fmt.Errorf("acquire %s: %w", g.resource, err)
		}
		leased[g.resource] = lease
	}
	if err := l.Release(ctx, leased["released"]); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	if b.Expire != nil {
		expired, err := l.Acquire(ctx, "expired", "E", time.Millisecond)
		if err != nil {
			return fmt.Errorf("acquire expired: %w", err)
		}
		if err := b.Expire(ctx, expired); err != nil {
			return fmt.Errorf("Backend.Expire: %w", err)
		}
	}
	live, now, err := l.Live(ctx)
	if err := listed("every live lease", live, now, err, leased["B-upper"], leased["b-lower"], leased["c/1"]); err != nil {
		return err
	}
	live, now, err = l.Live(ctx, "c/1", "released", "expired", "never", "b-lower", "c/1")
	if err := listed("the named leases", live, now, err, leased["b-lower"], leased["c/1"]); err != nil {
		return err
	}
	for _, bad := range BadNames() {
		if _, _, err := l.Live(ctx, "c/1", bad.Name); !errors.Is(err, leases.ErrInvalidInput) {
			return fmt.Errorf("%s among the named: %v; want ErrInvalidInput", bad.Why, err)
		}
	}
	return nil
}

// listed is an error unless live (listed at tick now, with err) are want
// in this order, each expiring after now.
func listed(what string, live []leases.Lease, now int64, err error, want ...leases.Lease) error {
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	same := len(live) == len(want)
	for i := 0; same && i < len(live); i++ {
		l, w := live[i], want[i]
		same = l.Resource == w.Resource && l.Holder == w.Holder && l.Epoch == w.Epoch && l.ExpiresAt > now
	}
	if !same {
		return fmt.Errorf("%s: %+v at tick %d; want %+v in this order, each expiring after the tick", what, live, now, want)
	}
	return nil
}

// checkLessorBadInput: every entry point of the lessor that takes a
// resource or a holder name refuses each of BadNames, and a ttl below a
// millisecond or an epoch below 1, with ErrInvalidInput in one line, and
// the store stays as it was, a live lease of "r" beside, whose release
// still works.
func checkLessorBadInput(ctx context.Context, b Backend) error {
	l := b.Lessor
	held, err := l.Acquire(ctx, "r", "A", time.Hour)
	if err != nil {
		return fmt.Errorf("acquire: %w", err)
	}
	c := calls{ctx, b}
	bad := []badCall{
		{"acquire: zero ttl", func() error { _, err := l.Acquire(ctx, "fresh", "B", 0); return err }},
		{"renew: negative ttl", func() error { _, err := l.Renew(ctx, held, -time.Second); return err }},
		{"renew: epoch 0", func() error {
			_, err := l.Renew(ctx, with(held, func(l *leases.Lease) { l.Epoch = 0 }), time.Second)
			return err
		}},
		{"release: epoch 0", func() error { return l.Release(ctx, with(held, func(l *leases.Lease) { l.Epoch = 0 })) }},
		{"release: negative epoch", func() error { return l.Release(ctx, with(held, func(l *leases.Lease) { l.Epoch = -1 })) }},
	}
	for _, name := range BadNames() {
		resource := with(held, func(l *leases.Lease) { l.Resource = name.Name })
		holder := with(held, func(l *leases.Lease) { l.Holder = name.Name })
		for _, call := range []badCall{
			{"acquire: resource", func() error { _, err := l.Acquire(ctx, name.Name, "B", time.Second); return err }},
			{"acquire: holder", func() error { _, err := l.Acquire(ctx, "fresh", name.Name, time.Second); return err }},
			{"renew: resource", func() error { _, err := l.Renew(ctx, resource, time.Second); return err }},
			{"renew: holder", func() error { _, err := l.Renew(ctx, holder, time.Second); return err }},
			{"release: resource", func() error { return l.Release(ctx, resource) }},
			{"release: holder", func() error { return l.Release(ctx, holder) }},
			{"lease", func() error { _, _, err := l.Lease(ctx, name.Name); return err }},
			{"live", func() error { _, _, err := l.Live(ctx, "r", name.Name); return err }},
			{"changed", c.changed(l, name.Name)},
		} {
			bad = append(bad, badCall{call.name + ": " + name.Why, call.call})
		}
	}
	if err := refuseEach(ctx, b, bad); err != nil {
		return err
	}
	if live, ok, err := l.Lease(ctx, "r"); err != nil || !ok || live.Holder != "A" || live.Epoch != held.Epoch {
		return fmt.Errorf("after the refused calls: %+v, %v, %v; want A's lease untouched", live, ok, err)
	}
	if err := l.Release(ctx, held); err != nil {
		return fmt.Errorf("the good lease's release: %w", err)
	}
	return nil
}
