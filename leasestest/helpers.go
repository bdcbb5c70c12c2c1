package leasestest

import (
	"context"
	"fmt"

	"leases"
)

// snapshot is b's state, for a later unchanged.
func snapshot(ctx context.Context, b Backend) (string, error) {
	s, err := b.State(ctx)
	if err != nil {
		return "", fmt.Errorf("Backend.State: %w", err)
	}
	return s, nil
}

// unchanged is an error when b's state is no longer before: what changed
// the store.
func unchanged(ctx context.Context, b Backend, before, what string) error {
	after, err := snapshot(ctx, b)
	if err != nil {
		return err
	}
	if after != before {
		return fmt.Errorf("%s changed the store:\n%s\nbecame\n%s", what, before, after)
	}
	return nil
}

// leaseOf is the lease a step expects of the authority.
func leaseOf(resource, holder string, epoch, grantedAt, expiresAt int64) leases.Lease {
	return leases.Lease{Resource: resource, Holder: holder, Epoch: epoch, GrantedAt: grantedAt, ExpiresAt: expiresAt}
}

// written is the record a write of value at epoch leaves behind.
func written(epoch int64, value string) leases.Record {
	return leases.Record{Epoch: epoch, ValueEpoch: epoch, Value: value}
}

// write is r's write, an error naming it when it fails.
func write(ctx context.Context, r leases.Receiver, resource string, epoch int64, value string) (leases.WriteResult, error) {
	result, err := r.Write(ctx, resource, epoch, value)
	if err != nil {
		return result, fmt.Errorf("%s write of %s at epoch %d: %w", r.Mode(), resource, epoch, err)
	}
	return result, nil
}

// wantWrite is an error unless r's write has outcome want and leaves
// record.
func wantWrite(ctx context.Context, r leases.Receiver, resource string, epoch int64, value string, want leases.Outcome, record leases.Record) error {
	got, err := write(ctx, r, resource, epoch, value)
	if err != nil {
		return err
	}
	if got.Outcome != want || got.Record != record {
		return fmt.Errorf("%s write of %s at epoch %d (%q): %s with %+v; want %s with %+v",
			r.Mode(), resource, epoch, value, got.Outcome, got.Record, want, record)
	}
	return nil
}

// acquire is the authority's grant, an error naming it when it fails.
func acquire(ctx context.Context, b Backend, resource, holder string, now, ttl int64) (leases.Lease, error) {
	l, err := b.Authority.Acquire(ctx, resource, holder, now, ttl)
	if err != nil {
		return l, fmt.Errorf("acquire %s by %s at tick %d: %w", resource, holder, now, err)
	}
	return l, nil
}
