package postgres

import (
	"context"

	"leases/fence"
)

// Tables are the store's tables, for the tests' dumps.
func (s *Store) Tables() []string {
	return []string{s.names.authority, s.names.fenced, s.names.unfenced, s.names.guarded}
}

// WithStep returns ctx with hook, which a store's transactions run before
// each of their steps (see step).
func WithStep(ctx context.Context, hook func(step string)) context.Context {
	return context.WithValue(ctx, stepKey{}, hook)
}

// TenureFence is the fence table of the store's tenures.
func (s *Store) TenureFence() *fence.Table { return s.tenures }
