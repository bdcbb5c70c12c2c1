package etcd

import (
	"context"
	"errors"
	"fmt"

	"leases"
	"leases/internal/rules"
)

// authority is the lease authority on a store's authority/ keys: one key
// per resource, holding its rules.LeaseRow as JSON.
type authority struct {
	store *Store
}

var _ leases.Authority = (*authority)(nil)

// Acquire implements [leases.Authority.Acquire].
func (a *authority) Acquire(ctx context.Context, resource, holder string, now, ttl int64) (leases.Lease, error) {
	if err := rules.CheckAcquire(resource, holder, now, ttl); err != nil {
		return leases.Lease{}, err
	}
	var granted leases.Lease
	key := a.store.key(authorityKind, resource)
	err := a.store.decide(ctx, []string{key}, func(views []view) ([]write, error) {
		row, found, err := decodeRow(views[0])
		if err != nil {
			return nil, err
		}
		next, lease, err := rules.Acquire(row, found, resource, holder, now, ttl)
		if err != nil {
			return nil, err
		}
		granted = lease
		return encode(key, next)
	})
	if err != nil {
		err = fmt.Errorf("acquire %q for %q at tick %d: %w", resource, holder, now, err)
		if errors.Is(err, leases.ErrOutcomeUnknown) {
			return granted, err // the lease that may now be live
		}
		return leases.Lease{}, err
	}
	return granted, nil
}

// Renew implements [leases.Authority.Renew].
func (a *authority) Renew(ctx context.Context, held leases.Lease, now, ttl int64) (leases.Lease, error) {
	if err := rules.First(rules.CheckHeld(held, now), rules.CheckTTL(now, ttl)); err != nil {
		return leases.Lease{}, err
	}
	var renewed leases.Lease
	key := a.store.key(authorityKind, held.Resource)
	err := a.store.decide(ctx, []string{key}, func(views []view) ([]write, error) {
		row, found, err := decodeRow(views[0])
		if err != nil {
			return nil, err
		}
		if row, renewed, err = rules.Renew(row, found, held, now, ttl); err != nil {
			return nil, err
		}
		return encode(key, row)
	})
	if err != nil {
		return leases.Lease{}, fmt.Errorf("renew %q for %q at tick %d: %w", held.Resource, held.Holder, now, err)
	}
	return renewed, nil
}

// Release implements [leases.Authority.Release]. The row stays, holding
// the epoch, so that the next acquire gets a higher one.
func (a *authority) Release(ctx context.Context, held leases.Lease, now int64) error {
	if err := rules.CheckHeld(held, now); err != nil {
		return err
	}
	key := a.store.key(authorityKind, held.Resource)
	err := a.store.decide(ctx, []string{key}, func(views []view) ([]write, error) {
		row, found, err := decodeRow(views[0])
		if err != nil {
			return nil, err
		}
		if row, err = rules.Release(row, found, held, now); err != nil {
			return nil, err
		}
		return encode(key, row)
	})
	if err != nil {
		return fmt.Errorf("release %q for %q at tick %d: %w", held.Resource, held.Holder, now, err)
	}
	return nil
}
