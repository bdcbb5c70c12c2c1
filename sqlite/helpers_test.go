package sqlite_test

import (
	"context"
	"testing"

	"leases"
	"leases/clock"
	"leases/sqlite"
	"leases/testkit/testctx"
)

// lessorOn opens the file at path with a store of its own on clk, closed
// when the test ends, and returns the store's Lessor.
func lessorOn(t *testing.T, path string, clk clock.Clock) leases.Lessor {
	t.Helper()
	s, err := sqlite.Options{Clock: clk}.Open(testctx.Context(t), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s.Lessor()
}

// mustAcquire acquires resource for holder at now for ttl ticks, failing
// t if it cannot.
func mustAcquire(t *testing.T, a leases.Authority, resource, holder string, now, ttl int64) leases.Lease {
	t.Helper()
	lease, err := a.Acquire(context.Background(), resource, holder, now, ttl)
	if err != nil {
		t.Fatalf("acquire %s for %s at %d: %v", resource, holder, now, err)
	}
	return lease
}

// mustWrite writes value for resource at epoch, failing t if it cannot.
func mustWrite(t *testing.T, r leases.Receiver, resource string, epoch int64, value string) leases.WriteResult {
	t.Helper()
	result, err := r.Write(context.Background(), resource, epoch, value)
	if err != nil {
		t.Fatalf("write %s epoch %d: %v", resource, epoch, err)
	}
	return result
}

// written is the record a write of value at epoch leaves behind.
func written(epoch int64, value string) leases.Record {
	return leases.Record{Epoch: epoch, ValueEpoch: epoch, Value: value}
}
