// Package etcdstore holds the tests of package leases/etcd that need a
// running cluster: the contract on etcd, concurrent callers, the three
// kinds of errors when a quorum is lost, a waiting session, the explorer
// on etcd, and the benchmarks. They live in this module, not in the etcd
// module, so that the library's users never require etcd's server; the
// package itself has no code.
package etcdstore
