// Package leases gives one worker at a time a resource, with an epoch (a
// fencing token) that lets the resource refuse a worker whose lease has
// run out: the types, the errors, and the interfaces every backend
// implements (SQLite, etcd, PostgreSQL).
//
// # Which guard
//
// A worker holds its lease with a session (package leases/session), which
// ends, on a timer of its own, before the lease can expire. What keeps a
// worker paused past its lease from doing harm is a guard where it acts:
//
//	your rows live                  call                           guarantees                          does not
//	in the leases' own database     store.Tenure(ctx, lease)       each tenure.Tx commits only while   protect effects outside
//	(sqlite.Store, postgres.Store)                                 the lease is live on the store's     the database
//	                                                               clock, at admission and at commit,
//	                                                               and its epoch is the newest
//	in a database of your own,      fences.Tenure(ctx, lease)      nothing of an older tenure commits  stop a stale holder
//	leases elsewhere (etcd)         (package leases/fence)         once a newer tenure has begun       before the newer
//	                                                                                                   tenure begins (the gap)
//	a tool behind HTTP or MCP,      httpfence.Handler(table, h),   at most one effect per operation    stop a stale call before the
//	its effects in its database     table.Do(ctx, call, effect)    key; no call of an older epoch      newer epoch reached the tool
//	(outside it: table.Begin)       (package leases/ops)           once a newer epoch was admitted     (the gap); an outside effect
//	                                                                                                   whose completion was lost
//
// The first two return a *fence.Tenure, whose Tx admits, runs and
// commits one transaction, and whose Resolve tells what became of a
// transaction whose outcome is unknown. docs/service.md says more, with
// the errors to tell apart: a refusal ([IsRefusal]), a failure before
// commit, and an unknown outcome ([ErrOutcomeUnknown]). The third answers each call from a
// record of operations (Accepted, [Replay], [Conflict], [Stale],
// [InProgress]): docs/tools.md.
//
// # Lessors
//
// A [Lessor] grants, renews and releases leases, lists the live ones and
// tells a waiter of a change; the caller says how long a lease should
// live, never what time it is. Every backend's Store.Lessor() returns one,
// on the authority's own clock: the machine's for a SQLite file, the
// server's for PostgreSQL, etcd's own leases for etcd. A [Lease] says
// whose clock its ticks are ([Ticks]) and whether its expiry is exact.
//
// # The contract's model
//
// The rest of this package is the model the evidence runs (cmd/run-experiment,
// the contract's clauses): an [Authority] with explicit ticks, which never
// reads a clock (the caller says what time it is), and the receivers that
// show what a lease alone does not prevent. A fenced [Receiver] remembers
// the highest epoch it has committed per resource and rejects a write
// that carries a lower one ([Stale]); an unfenced one stores whatever
// comes last. The receiver never reads the authority's records: it learns
// of a newer holder only when that holder's epoch reaches it, and until
// then a stale holder's write is accepted; that gap is part of the
// contract. A [GuardedReceiver] reads the authority in the write's own
// transaction, and closes the gap. These are the contract's model, not
// the service API: a service uses a session and a tenure.
package leases
