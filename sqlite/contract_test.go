package sqlite_test

import (
	"testing"

	"leases/leasestest"
	"leases/testkit/sqlitetest"
)

// The contract's public suite, every clause, on a SQLite file: the
// authority and the receivers, the Lessor on a manual host clock, and the
// store's Tenure as the guard, which checks the lease on that clock.
func TestContract(t *testing.T) {
	leasestest.Run(t, sqlitetest.Backend)
}
