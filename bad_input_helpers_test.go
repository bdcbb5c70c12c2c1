package leases_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"leases"
	"leases/sqlite"
)

// badInputStore is a store in a state worth protecting (A's live lease on
// "r", ticks 5 to 15, and A's value written) with builders for calls on it.
// TestBadInputChangesNothing and TestInvalidInputIsRefusedAndChangesNothing
// share it: the second runs the first's calls and more.
type badInputStore struct {
	ctx              context.Context
	path             string
	auth             leases.Authority
	fenced, unfenced leases.Receiver
	store            *sqlite.Store
	held             leases.Lease
	rows             string // every row, before any bad call
}

// badCall is one call that must be refused as invalid input.
type badCall struct {
	name string
	call func() error
}

func newBadInputStore(t *testing.T) *badInputStore {
	t.Helper()
	s := &badInputStore{ctx: context.Background(), path: tempDBPath(t)}
	s.store = openStore(t, s.path)
	s.auth, s.fenced, s.unfenced = s.store.Authority(), s.store.Receiver(leases.Fenced), s.store.Receiver(leases.Unfenced)
	s.held = mustAcquire(t, s.auth, "r", "A", 5, 10)
	mustWrite(t, s.fenced, "r", s.held.Epoch, "v")
	s.rows = dumpTables(t, s.path)
	return s
}

func (s *badInputStore) acquire(resource, holder string, now, ttl int64) func() error {
	return func() error { _, err := s.auth.Acquire(s.ctx, resource, holder, now, ttl); return err }
}

func (s *badInputStore) renew(l leases.Lease, now, ttl int64) func() error {
	return func() error { _, err := s.auth.Renew(s.ctx, l, now, ttl); return err }
}

func (s *badInputStore) release(l leases.Lease, now int64) func() error {
	return func() error { return s.auth.Release(s.ctx, l, now) }
}

func (s *badInputStore) write(r leases.Receiver, resource string, epoch int64, value string) func() error {
	return func() error { _, err := r.Write(s.ctx, resource, epoch, value); return err }
}

func (s *badInputStore) observe(r leases.Receiver, resource string, epoch int64) func() error {
	return func() error { _, err := r.Observe(s.ctx, resource, epoch); return err }
}

func (s *badInputStore) read(resource string) func() error {
	return func() error { _, _, err := s.fenced.Read(s.ctx, resource); return err }
}

// heldWith is the held lease with change applied: a lease nobody was granted.
func (s *badInputStore) heldWith(change func(*leases.Lease)) leases.Lease {
	l := s.held
	change(&l)
	return l
}

// refuseEach runs each call in a subtest of its own and fails it unless
// the call is refused with ErrInvalidInput, in one line of at most
// maxMessage bytes, and every row is as it was.
func (s *badInputStore) refuseEach(t *testing.T, calls []badCall, maxMessage int) {
	t.Helper()
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			err := c.call()
			if !errors.Is(err, leases.ErrInvalidInput) || strings.Contains(err.Error(), "\n") || len(err.Error()) > maxMessage {
				t.Fatalf("got %v; want one line of at most %d bytes matching ErrInvalidInput", err, maxMessage)
			}
			if after := dumpTables(t, s.path); after != s.rows {
				t.Fatalf("the database changed:\n%s\nbecame\n%s", s.rows, after)
			}
		})
	}
}
