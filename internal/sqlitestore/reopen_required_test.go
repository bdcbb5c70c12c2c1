package sqlitestore

import (
	"context"
	"errors"
	"testing"

	"leases"
)

// Once a commit's outcome is unknown, this process's view may disagree
// with the file, so every entry point refuses until the store is
// reopened: the operations, the integrity check and the explorer's
// snapshot alike. (TestFailedCommitIsAnUnknownOutcome makes a real commit
// fail; here the store is marked as that failure marks it.)
func TestEveryEntryRefusesAfterAnUnknownOutcome(t *testing.T) {
	ctx := context.Background()
	s, a := storeWorthProtecting(t)
	unknown := errors.New("commit failed: disk I/O error")
	s.failed.Store(&unknown)
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"acquire", func() error { _, err := s.Authority().Acquire(ctx, "fresh", "B", 20, 1); return err }},
		{"renew", func() error { _, err := s.Authority().Renew(ctx, a, 6, 3); return err }},
		{"release", func() error { return s.Authority().Release(ctx, a, 6) }},
		{"holder", func() error { _, _, err := s.Authority().Lease(ctx, "r", 6); return err }},
		{"fenced write", func() error { _, err := s.Receiver(leases.Fenced).Write(ctx, "r", 3, "v3"); return err }},
		{"observe", func() error { _, err := s.Receiver(leases.Fenced).Fence(ctx, "r", 3); return err }},
		{"unfenced write", func() error { _, err := s.Receiver(leases.Unfenced).Write(ctx, "r", 3, "v3"); return err }},
		{"guarded write", func() error { _, err := s.Guarded().Write(ctx, a, 6, "v2"); return err }},
		{"integrity check", func() error { _, err := s.IntegrityCheck(ctx); return err }},
		{"snapshot", func() error { _, err := s.Snapshot(ctx); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); !errors.Is(err, ErrReopenRequired) {
				t.Fatalf("%v; want ErrReopenRequired", err)
			}
		})
	}
}
