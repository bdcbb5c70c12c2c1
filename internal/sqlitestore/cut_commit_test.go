package sqlitestore

import (
	"context"
	"errors"
	"testing"

	"leases"
)

// A context that ends after the store's last look at it and before the
// commit (a session's deadline cutting off its own renewal) ends the
// transaction with a known outcome: nothing changed, the store answers
// on, and the call is a failure before commit that matches the context's
// error. Taken for an unknown outcome, it would make the store refuse
// everything until reopened (the chaos test of the service path saw a
// worker's every session end that way).
func TestACommitTheContextCutOffChangedNothing(t *testing.T) {
	s, a := storeWorthProtecting(t)
	ctx, cancel := context.WithCancel(context.Background())
	beforeCommit = cancel
	t.Cleanup(func() { beforeCommit = func() {} })
	_, err := s.Authority().Renew(ctx, a, 6, 100)
	beforeCommit = func() {}
	if err == nil || errors.Is(err, leases.ErrOutcomeUnknown) || !errors.Is(err, context.Canceled) {
		t.Fatalf("renew whose context ended before its commit: %v; want a failure before commit matching context.Canceled", err)
	}
	held, live, err := s.Authority().Lease(context.Background(), "r", 6)
	if err != nil {
		t.Fatalf("the store after a commit the context cut off: %v; want it to answer on", err)
	}
	if !live || held.ExpiresAt != a.ExpiresAt {
		t.Fatalf("lease after the cut-off renewal: %+v (live %v); want it unchanged, expiring at %d", held, live, a.ExpiresAt)
	}
}
