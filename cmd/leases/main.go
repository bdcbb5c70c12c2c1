// Command leases is the operator's tool for leases: who holds what and
// until when, the explicit acquire, renew and release, and a command run
// under a lease (like consul lock or flock(1)), on a SQLite file, a
// PostgreSQL database or an etcd cluster, always on the store's own
// clock, never on the caller's.
//
//	leases holders --sqlite /var/lib/app/leases.db
//	leases run nightly-report --etcd 10.0.0.1:2379 --ttl 30s --wait -- ./report.sh
//
// Exit status: 0 success (for run, CMD's own status when it ran to its
// end under the lease), 1 refused (held by another, not the holder,
// expired), 2 usage or bad input (nothing was done), 3 failure (the store
// unreachable or failing, or an outcome unknown, said as such), 4 run's
// lease ended before CMD did and CMD was stopped. leases -h says more,
// and docs/operators.md has examples.
//
// It is a module of its own, like cmd/run-experiment, so that a user of
// the library alone never downloads what the command links. Each store
// is one file (backend_sqlite.go, backend_postgres.go, backend_etcd.go)
// that registers itself.
package main

import (
	"os"

	"leases/internal/roles"
)

func main() {
	roles.Run() // the watchdog of run's CMD is this binary too
	os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr))
}
