package session_test

// A session's renewal next to its floor, a bare Renew of the same lease on
// the same store, measured in the same run:
//
//	go test -run '^$' -bench Renewal -count 5 ./session/

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"leases"
	"leases/clock"
	"leases/session"
	"leases/sqlite"
)

func BenchmarkRenewal(b *testing.B) {
	for _, storage := range []string{"file", "memory"} {
		b.Run(storage, func(b *testing.B) {
			ctx := context.Background()
			// The floor: a bare Renew of a lease of its own, on a store of
			// its own, timed call by call, alternating with the session's
			// renewals, so that a loaded machine weighs on both alike.
			bare := benchAuthority(b, storage)
			lease, err := bare.Acquire(ctx, "r", "A", 0, 10)
			if err != nil {
				b.Fatal(err)
			}
			clk := clock.NewManual(0)
			s, err := session.Start(ctx, clock.Lessor(benchAuthority(b, storage), clk), "r", "A",
				session.Options{TTL: 10 * time.Millisecond, RenewEvery: time.Millisecond})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close(ctx) })
			if err := clk.Waiters(ctx, 2); err != nil {
				b.Fatal(err)
			}
			var floor, renewal time.Duration
			for i := int64(1); b.Loop(); i++ {
				start := time.Now()
				if lease, err = bare.Renew(ctx, lease, i, 10); err != nil {
					b.Fatal(err)
				}
				floor += time.Since(start)
				// One tick: the session wakes, renews, and both its
				// goroutines wait again.
				start = time.Now()
				if err := clk.Advance(i); err != nil {
					b.Fatal(err)
				}
				if err := clk.Waiters(ctx, 2); err != nil {
					b.Fatal(err)
				}
				renewal += time.Since(start)
			}
			if s.Lease().ExpiresAt != int64(b.N)+10 {
				b.Fatalf("the session renewed to %d, want %d", s.Lease().ExpiresAt, b.N+10)
			}
			b.ReportMetric(float64(floor.Nanoseconds())/float64(b.N), "renew-ns/op")
			b.ReportMetric(float64(renewal.Nanoseconds())/float64(b.N), "session-ns/op")
			b.ReportMetric(float64(renewal)/float64(floor), "x-floor")
		})
	}
}

func benchAuthority(b *testing.B, storage string) leases.Authority {
	b.Helper()
	path := ":memory:"
	if storage == "file" {
		path = filepath.Join(b.TempDir(), "leases.db")
	}
	store, err := sqlite.Open(context.Background(), path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = store.Close() })
	return store.Authority()
}
