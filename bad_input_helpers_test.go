package leases_test

import (
	"context"
	"testing"

	"leases"
	"leases/internal/contract"
)

// badInputStore is a SQLite store as contract.BadInputSetup leaves it (A's
// live lease on "r", ticks 5 to 15, and A's value), with builders for calls
// on it. TestInvalidInputIsRefusedAndChangesNothing runs the contract's
// bad calls on it and more.
type badInputStore struct {
	ctx  context.Context
	b    contract.Backend
	held leases.Lease
}

func newBadInputStore(t *testing.T) *badInputStore {
	t.Helper()
	b := sqliteBackend(t)
	return &badInputStore{ctx: context.Background(), b: b, held: contract.BadInputSetup(t, b)}
}

func (s *badInputStore) acquire(resource, holder string, now, ttl int64) func() error {
	return func() error { _, err := s.b.Authority.Acquire(s.ctx, resource, holder, now, ttl); return err }
}

func (s *badInputStore) renew(l leases.Lease, now, ttl int64) func() error {
	return func() error { _, err := s.b.Authority.Renew(s.ctx, l, now, ttl); return err }
}

func (s *badInputStore) release(l leases.Lease, now int64) func() error {
	return func() error { return s.b.Authority.Release(s.ctx, l, now) }
}

func (s *badInputStore) write(r leases.Receiver, resource string, epoch int64, value string) func() error {
	return func() error { _, err := r.Write(s.ctx, resource, epoch, value); return err }
}

func (s *badInputStore) observe(r leases.Receiver, resource string, epoch int64) func() error {
	return func() error { _, err := r.Observe(s.ctx, resource, epoch); return err }
}

func (s *badInputStore) read(resource string) func() error {
	return func() error { _, _, err := s.b.Fenced.Read(s.ctx, resource); return err }
}

func (s *badInputStore) holder(resource string, now int64) func() error {
	return func() error { _, _, err := s.b.Authority.Holder(s.ctx, resource, now); return err }
}

// heldWith is the held lease with change applied: a lease nobody was granted.
func (s *badInputStore) heldWith(change func(*leases.Lease)) leases.Lease {
	l := s.held
	change(&l)
	return l
}
