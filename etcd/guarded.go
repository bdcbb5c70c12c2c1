package etcd

import (
	"context"
	"fmt"

	"leases"
	"leases/internal/rules"
)

// guarded is the guarded receiver on a store's guarded/ keys. Every write
// decides on the authority's row and the guarded record as they are at
// one revision, and commits only if neither has changed since.
type guarded struct {
	store *Store
}

var _ leases.GuardedReceiver = (*guarded)(nil)

// Write implements [leases.GuardedReceiver.Write].
func (g *guarded) Write(ctx context.Context, held leases.Lease, now int64, value string) (leases.WriteResult, error) {
	if err := rules.CheckGuarded(held, now, value); err != nil {
		return leases.WriteResult{}, err
	}
	var result leases.WriteResult
	lease, key := g.store.key(authorityKind, held.Resource), g.store.key(guardedKind, held.Resource)
	err := g.store.decide(ctx, []string{lease, key}, func(views []view) ([]write, error) {
		row, found, err := decodeRow(views[0])
		if err != nil {
			return nil, err
		}
		stored, storedFound, err := decodeRecord(views[1])
		if err != nil {
			return nil, err
		}
		if result, err = rules.Guarded(row, found, held, now, stored, storedFound, value); err != nil {
			return nil, err
		}
		return acceptedWrite(key, result)
	})
	if err != nil {
		return leases.WriteResult{}, fmt.Errorf("guarded write %q at epoch %d at tick %d: %w", held.Resource, held.Epoch, now, err)
	}
	return result, nil
}

// Read implements [leases.GuardedReceiver.Read].
func (g *guarded) Read(ctx context.Context, resource string) (record leases.Record, found bool, err error) {
	if err := rules.CheckName("resource", resource); err != nil {
		return leases.Record{}, false, err
	}
	return g.store.readRecord(ctx, g.store.key(guardedKind, resource), resource)
}
