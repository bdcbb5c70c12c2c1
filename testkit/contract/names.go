package contract

import (
	"context"
	"errors"
	"testing"
	"time"

	"leases"
)

// LessorRefusesBadNames: every entry point of lessor that takes a
// resource or a holder name (Acquire, Renew, Release, Holder, and Changed
// and Live where it is a Watcher and a Lister) refuses each of BadNames
// with ErrInvalidInput, in one line, and state (everything the store
// holds) stays as it was, a live lease of "r" beside.
func LessorRefusesBadNames(t *testing.T, lessor leases.Lessor, state func(t *testing.T) string) {
	t.Helper()
	ctx := context.Background()
	held, err := lessor.Acquire(ctx, "r", "A", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var calls []BadCall
	for _, bad := range BadNames {
		resource, holder := held, held
		resource.Resource, holder.Holder = bad.Name, bad.Name
		each := []BadCall{
			{"acquire: resource", func() error { _, err := lessor.Acquire(ctx, bad.Name, "B", time.Second); return err }},
			{"acquire: holder", func() error { _, err := lessor.Acquire(ctx, "fresh", bad.Name, time.Second); return err }},
			{"renew: resource", func() error { _, err := lessor.Renew(ctx, resource, time.Second); return err }},
			{"renew: holder", func() error { _, err := lessor.Renew(ctx, holder, time.Second); return err }},
			{"release: resource", func() error { return lessor.Release(ctx, resource) }},
			{"release: holder", func() error { return lessor.Release(ctx, holder) }},
			{"holder", func() error { _, _, err := lessor.Lease(ctx, bad.Name); return err }},
		}
		each = append(each,
			BadCall{"changed", func() error { return changed(lessor, bad.Name) }},
			BadCall{"live", func() error { _, _, err := lessor.Live(ctx, "r", bad.Name); return err }})
		for _, call := range each {
			calls = append(calls, BadCall{Name: call.Name + ": " + bad.Why, Call: call.Call})
		}
	}
	refuseEach(t, state, calls, 400)
	if live, ok, err := lessor.Lease(ctx, "r"); err != nil || !ok || live.Holder != "A" || live.Epoch != held.Epoch {
		t.Fatalf("after the refused calls: %+v, %v, %v; want A's lease untouched", live, ok, err)
	}
	if errors.Is(lessor.Release(ctx, held), leases.ErrInvalidInput) {
		t.Fatal("the good lease's release refused as invalid input")
	}
}
