package etcd

import (
	"context"
	"fmt"

	"leases"
	"leases/internal/outcome"
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
	err := a.decideRow(ctx, resource, func(row rules.LeaseRow, found bool) (next rules.LeaseRow, err error) {
		next, granted, err = rules.Acquire(row, found, resource, holder, now, ttl)
		return next, err
	})
	return rules.Granted(granted, err, resource, holder, now)
}

// Renew implements [leases.Authority.Renew].
func (a *authority) Renew(ctx context.Context, held leases.Lease, now, ttl int64) (leases.Lease, error) {
	if err := rules.First(rules.CheckHeld(held, now), rules.CheckTTL(now, ttl)); err != nil {
		return leases.Lease{}, err
	}
	var renewed leases.Lease
	err := a.decideRow(ctx, held.Resource, func(row rules.LeaseRow, found bool) (next rules.LeaseRow, err error) {
		next, renewed, err = rules.Renew(row, found, held, now, ttl)
		return next, err
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
	err := a.decideRow(ctx, held.Resource, func(row rules.LeaseRow, found bool) (rules.LeaseRow, error) {
		return rules.Release(row, found, held, now)
	})
	if err != nil {
		return fmt.Errorf("release %q for %q at tick %d: %w", held.Resource, held.Holder, now, err)
	}
	return nil
}

// Lease implements [leases.Authority.Lease] with one linearizable read.
func (a *authority) Lease(ctx context.Context, resource string, now int64) (leases.Lease, bool, error) {
	if err := rules.CheckHolder(resource, now); err != nil {
		return leases.Lease{}, false, err
	}
	views, err := a.store.read(ctx, a.store.key(authorityKind, resource))
	if err != nil {
		return leases.Lease{}, false, fmt.Errorf("holder of %q at tick %d: %w", resource, now, outcome.BeforeCommit(ctx, err))
	}
	row, found, err := decodeRow(views[0])
	if err != nil {
		return leases.Lease{}, false, fmt.Errorf("holder of %q at tick %d: %w", resource, now, err)
	}
	lease, live := rules.Holder(row, found, resource, now)
	return lease, live, nil
}

// Changed implements [leases.Authority.Changed] with an etcd watch on the resource's
// row: any process's grant, renewal or release committed after the call
// closes the channel.
func (a *authority) Changed(ctx context.Context, resource string) (<-chan struct{}, error) {
	return a.store.watch(ctx, resource, a.store.key(authorityKind, resource), "")
}

// decideRow makes one decision on resource's lease row, in one
// transaction: decide gets the row, and whether there is one, and returns
// the row to write, or an error to write nothing. decide may run again,
// on the current row, when the store's guess was stale.
func (a *authority) decideRow(ctx context.Context, resource string, decide func(row rules.LeaseRow, found bool) (rules.LeaseRow, error)) error {
	key := a.store.key(authorityKind, resource)
	return a.store.decide(ctx, []string{key}, func(views []view) ([]write, error) {
		row, found, err := decodeRow(views[0])
		if err != nil {
			return nil, err
		}
		next, err := decide(row, found)
		switch {
		case err != nil && leases.IsRefusal(err) && a.store.cache.inDoubt(key):
			// A write of this store's to the row may still be applied (an
			// acquire whose outcome was unknown): the refusal is committed
			// with the row written again as it stands (a blank row if
			// there is none, which decides like none), whose new revision
			// that write's compare no longer matches. A release refused
			// because the acquire did not take effect is then final.
			fence, ferr := encode(key, row)
			if ferr != nil {
				return nil, ferr
			}
			return fence, err
		case err != nil:
			return nil, err
		}
		return encode(key, next)
	})
}
