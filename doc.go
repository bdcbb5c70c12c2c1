// Package leases defines a lease authority and a fenced receiver, built to
// show where leases and fencing tokens protect a shared resource from a
// paused old lease holder, and where they do not.
//
// An [Authority] grants time-limited leases on named resources. Every grant
// carries an epoch (a fencing token) that is strictly greater than every
// epoch granted before for that resource, also after a release. Time is
// logical: the caller supplies the current tick, and a lease granted at tick
// t with a time-to-live of d ticks is live for ticks t .. t+d-1 and expired
// from tick t+d on. No wall clock is consulted and nothing sleeps.
//
// A [Receiver] is the shared resource the lease protects. In [Fenced] mode it
// remembers the highest epoch it has committed per resource and rejects a
// write that carries a lower one; in [Unfenced] mode it stores whatever comes
// last, the baseline that shows what leases alone do not prevent. The
// receiver never reads the authority's records: it learns about a newer
// holder only when that holder's epoch reaches it. Until then a stale
// holder's write is accepted; that gap is part of the contract, not a bug.
//
// This package holds the types and the contract; backends implement it.
// Package leases/sqlite keeps the authority and the receivers in one
// SQLite file, every operation a transaction of its own; package
// leases/etcd keeps them in an etcd cluster (a module of its own). For a
// service, package leases/session holds a lease on a clock (package
// leases/clock) and package leases/fence puts the fenced receiver's rule
// inside your own database transaction.
package leases
