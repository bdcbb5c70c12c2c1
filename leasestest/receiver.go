package leasestest

import (
	"context"
	"errors"
	"fmt"

	"leases"
)

// checkFencedOutcomes: every outcome of the fenced receiver, each on a
// resource of its own whose record is written at epoch 2 first (but the
// first), with the record unchanged on replay, conflict and stale, and
// another resource's record left alone.
func checkFencedOutcomes(ctx context.Context, b Backend) error {
	stored := written(2, "v2")
	if err := wantWrite(ctx, b.Fenced, "other", 9, "kept", leases.Accepted, written(9, "kept")); err != nil {
		return err
	}
	cases := []struct {
		name     string
		resource string
		empty    bool
		epoch    int64
		value    string
		want     leases.Outcome
	}{
		{"first write to an empty receiver", "r1", true, 1, "v1", leases.Accepted},
		{"higher epoch", "r2", false, 3, "v3", leases.Accepted},
		{"equal epoch and value: replay", "r3", false, 2, "v2", leases.Replay},
		{"equal epoch, other value: conflict", "r4", false, 2, "other", leases.Conflict},
		{"lower epoch: stale", "r5", false, 1, "v1", leases.Stale},
	}
	var errs []error
	for _, tc := range cases {
		err := func() error {
			if !tc.empty {
				if _, err := write(ctx, b.Fenced, tc.resource, stored.Epoch, stored.Value); err != nil {
					return err
				}
			}
			before, err := snapshot(ctx, b)
			if err != nil {
				return err
			}
			want := stored
			if tc.want == leases.Accepted {
				want = written(tc.epoch, tc.value)
			}
			if err := wantWrite(ctx, b.Fenced, tc.resource, tc.epoch, tc.value, tc.want, want); err != nil {
				return err
			}
			if tc.want.Stored() != (tc.want == leases.Accepted) {
				return fmt.Errorf("outcome %s says stored %v", tc.want, tc.want.Stored())
			}
			if tc.want != leases.Accepted {
				if err := unchanged(ctx, b, before, "a "+string(tc.want)+" write"); err != nil {
					return err
				}
			}
			return readBack(ctx, b.Fenced, map[string]leases.Record{tc.resource: want, "other": written(9, "kept")})
		}()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", tc.name, err))
		}
	}
	if err := readBack(ctx, b.Fenced, map[string]leases.Record{"never-written": {}}); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// reader is what a receiver and a guarded receiver have in common.
type reader interface {
	Read(ctx context.Context, resource string) (leases.Record, bool, error)
}

// readBack is an error unless r holds each record of want, the zero
// record meaning none.
func readBack(ctx context.Context, r reader, want map[string]leases.Record) error {
	for resource, w := range want {
		got, found, err := r.Read(ctx, resource)
		if err != nil || found != (w != leases.Record{}) || got != w {
			return fmt.Errorf("read of %s: %+v, found %v, %v; want %+v, found %v", resource, got, found, err, w, w != leases.Record{})
		}
	}
	return nil
}

// checkFenceOutcomes: Fence raises the fence without a value (Accepted),
// is a replay at the fence and stale below it; the stored value stays,
// and the first write at the raised epoch is accepted. An unfenced
// receiver refuses it as invalid input.
func checkFenceOutcomes(ctx context.Context, b Backend) error {
	raise := func(resource string, epoch int64, want leases.Outcome, record leases.Record) error {
		before, err := snapshot(ctx, b)
		if err != nil {
			return err
		}
		got, err := b.Fenced.Fence(ctx, resource, epoch)
		if err != nil || got.Outcome != want || got.Record != record {
			return fmt.Errorf("fence of %s at %d: %+v, %v; want %s with %+v", resource, epoch, got, err, want, record)
		}
		if want == leases.Accepted {
			return nil
		}
		return unchanged(ctx, b, before, "a "+string(want)+" fence")
	}
	kept := leases.Record{Epoch: 2, ValueEpoch: 1, Value: "v1"}
	steps := []func() error{
		func() error { return raise("empty", 3, leases.Accepted, leases.Record{Epoch: 3}) },
		func() error {
			return wantWrite(ctx, b.Fenced, "empty", 2, "late", leases.Stale, leases.Record{Epoch: 3})
		},
		func() error { return wantWrite(ctx, b.Fenced, "r", 1, "v1", leases.Accepted, written(1, "v1")) },
		func() error { return raise("r", 2, leases.Accepted, kept) },
		func() error { return raise("r", 2, leases.Replay, kept) },
		func() error { return raise("r", 1, leases.Stale, kept) },
		func() error { return wantWrite(ctx, b.Fenced, "r", 1, "old", leases.Stale, kept) },
		func() error { return wantWrite(ctx, b.Fenced, "r", 2, "v2", leases.Accepted, written(2, "v2")) },
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return err
		}
	}
	if b.Unfenced == nil {
		return nil
	}
	if _, err := b.Unfenced.Fence(ctx, "r", 3); !errors.Is(err, leases.ErrInvalidInput) {
		return fmt.Errorf("fence on the unfenced receiver: %v; want ErrInvalidInput", err)
	}
	return nil
}

// checkUnfencedOutcomes: without the comparison, whatever comes last
// wins; nothing written through the unfenced receiver can lower the
// fenced receiver's fence.
func checkUnfencedOutcomes(ctx context.Context, b Backend) error {
	if err := wantWrite(ctx, b.Fenced, "r", 5, "fenced", leases.Accepted, written(5, "fenced")); err != nil {
		return err
	}
	for _, w := range []struct {
		epoch int64
		value string
	}{{2, "new"}, {2, "another"}, {1, "old"}} {
		if err := wantWrite(ctx, b.Unfenced, "r", w.epoch, w.value, leases.Accepted, written(w.epoch, w.value)); err != nil {
			return err
		}
	}
	if err := readBack(ctx, b.Unfenced, map[string]leases.Record{"r": written(1, "old")}); err != nil {
		return fmt.Errorf("the unfenced receiver keeps the last write: %w", err)
	}
	if err := wantWrite(ctx, b.Fenced, "r", 4, "late", leases.Stale, written(5, "fenced")); err != nil {
		return fmt.Errorf("after the unfenced writes: %w", err)
	}
	if _, err := b.Fenced.Fence(ctx, "r", 9); err != nil {
		return fmt.Errorf("fence: %w", err)
	}
	if _, err := write(ctx, b.Unfenced, "r", 1, "lower"); err != nil {
		return err
	}
	if got, _, err := b.Fenced.Read(ctx, "r"); err != nil || got.Epoch != 9 {
		return fmt.Errorf("fenced record %+v, %v after an unfenced write; want the fence at 9", got, err)
	}
	return nil
}

// guardedStep is one guarded write and what it must give.
type guardedStep struct {
	name    string
	held    leases.Lease
	now     int64
	value   string
	want    leases.Outcome
	record  leases.Record // reported after the call
	wantErr error
}

// run is an error unless the step's write gives what it must, and
// changes nothing unless accepted.
func (s guardedStep) run(ctx context.Context, b Backend) error {
	before, err := snapshot(ctx, b)
	if err != nil {
		return err
	}
	got, err := b.Guarded.Write(ctx, s.held, s.now, s.value)
	switch {
	case s.wantErr != nil:
		if !errors.Is(err, s.wantErr) {
			return fmt.Errorf("%s: %+v, %v; want %v", s.name, got, err, s.wantErr)
		}
	case err != nil || got.Outcome != s.want || got.Record != s.record || got.Outcome.Stored() != (s.want == leases.Accepted):
		return fmt.Errorf("%s: %+v, %v; want %s with %+v", s.name, got, err, s.want, s.record)
	}
	if s.want == leases.Accepted {
		return nil
	}
	return unchanged(ctx, b, before, s.name)
}

// checkGuardedOutcomes: a guarded write is accepted only while the
// writer's lease is the authority's live lease at the write's tick, and
// then as a fenced receiver would; every other outcome changes nothing.
func checkGuardedOutcomes(ctx context.Context, b Backend) error {
	a, err := acquire(ctx, b, "r", "A", 10, 5) // live at ticks 10 to 14
	if err != nil {
		return err
	}
	other, err := acquire(ctx, b, "other", "A", 10, 100)
	if err != nil {
		return err
	}
	impostor := a
	impostor.Holder = "B"
	steps := []guardedStep{
		{"A's first write", a, 10, "a1", leases.Accepted, written(1, "a1"), nil},
		{"the same again: replay", a, 11, "a1", leases.Replay, written(1, "a1"), nil},
		{"another value at the same epoch: conflict", a, 12, "a2", leases.Conflict, written(1, "a1"), nil},
		{"the last live tick", a, 14, "a1", leases.Replay, written(1, "a1"), nil},
		{"at the expiry tick: not live", a, 15, "late", leases.NotLive, written(1, "a1"), nil},
		{"a holder that was never granted it", impostor, 12, "b", leases.NotLive, written(1, "a1"), nil},
		{"a resource never leased", leaseOf("never-leased", "A", 1, 0, 100), 12, "x", leases.NotLive, leases.Record{}, nil},
		{"a tick before the lease's last change", other, 9, "x", "", leases.Record{}, leases.ErrTickBackwards},
	}
	for _, s := range steps {
		if err := s.run(ctx, b); err != nil {
			return err
		}
	}
	return supersededAndReleased(ctx, b, a)
}

// supersededAndReleased: a new holder's lease supersedes A's (a, expired
// at 15), and B's write is accepted over A's value; A is then not live,
// nor B after its release; the guarded records are apart from the
// fenced receiver's.
func supersededAndReleased(ctx context.Context, b Backend, a leases.Lease) error {
	bLease, err := acquire(ctx, b, "r", "B", 15, 5)
	if err != nil {
		return err
	}
	steps := []guardedStep{
		{"B's write", bLease, 15, "b1", leases.Accepted, written(2, "b1"), nil},
		{"A's write after B's grant", a, 15, "a-late", leases.NotLive, written(2, "b1"), nil},
	}
	for _, s := range steps {
		if err := s.run(ctx, b); err != nil {
			return err
		}
	}
	if err := b.Authority.Release(ctx, bLease, 16); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	s := guardedStep{"B's write after its release", bLease, 16, "b2", leases.NotLive, written(2, "b1"), nil}
	if err := s.run(ctx, b); err != nil {
		return err
	}
	if err := readBack(ctx, b.Guarded, map[string]leases.Record{"r": written(2, "b1"), "never-leased": {}}); err != nil {
		return fmt.Errorf("guarded: %w", err)
	}
	if b.Fenced == nil {
		return nil
	}
	if err := readBack(ctx, b.Fenced, map[string]leases.Record{"r": {}}); err != nil {
		return fmt.Errorf("a guarded write showed in the fenced receiver: %w", err)
	}
	return nil
}
