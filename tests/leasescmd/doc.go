// Package leasescmd holds the tests of the operators' command leases
// that run it built, as a user builds it (go build of cmd/leases), on the
// stores the tests start: a SQLite file, a PostgreSQL server of the
// test's own (package leases/postgres/pgtest), and an etcd cluster
// (package leases/etcdcluster). They live in this module, not in
// cmd/leases's, so that the command's module never requires etcd's
// server; the package itself has no code.
package leasescmd
