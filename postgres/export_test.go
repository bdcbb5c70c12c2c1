package postgres

import (
	"context"
	"time"

	"leases"

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

// JoinRenewal puts a renewal of held in the store's next batch before it
// returns, and returns the wait for its answer: a test knows which batch
// each renewal is in.
func (s *Store) JoinRenewal(ctx context.Context, held leases.Lease, ttl time.Duration) func() (leases.Lease, error) {
	answer := s.renewals.Join(renewal{ctx, held, ttl.Milliseconds()})
	return func() (leases.Lease, error) { a := <-answer; return a.lease, a.err }
}
