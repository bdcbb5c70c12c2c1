// Package httpfence puts the record of operations (package leases/ops)
// in front of an HTTP tool server, with the standard library alone: the
// server refuses a caller whose epoch is older than one it has admitted,
// answers a retried call from its record, and never does one operation
// twice; the client sends each request with its session's lease and an
// operation key.
//
// # The receiver
//
// [Handler] serves effects in the receiver's own database: the handler
// does them in [Tx], the record's transaction, which commits them with
// the record. [External] serves effects outside the database, with a
// pending record committed before the handler runs and completed after.
// Both answer as [Handler] says: stale and in progress 409, conflict
// 422, a replay the stored status and body with "Idempotent-Replayed:
// true", a request without its headers 428 or 400.
//
// # The caller
//
// [Transport] sends the headers from a session (package leases/session)
// and refuses to send once it has ended; [FromEnvironment] from the
// environment that `leases run` gives its command. docs/tools.md says
// what this guarantees and what it cannot.
package httpfence
