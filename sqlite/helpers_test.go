package sqlite_test

import (
	"testing"

	"leases"
	"leases/clock"
	"leases/internal/testctx"
	"leases/sqlite"
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
