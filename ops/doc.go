// Package ops keeps a record of the operations a lease holder performs
// within its tenure, in the receiver's own database (SQLite or
// PostgreSQL): a tool server answers each call from it, so that a
// retried call is never done twice and a holder whose epoch is older
// than one already admitted is refused.
//
// Each call names its operation: the holder's resource and epoch, and a
// key of its own choosing (an Idempotency-Key). A holder may perform any
// number of operations under one epoch, one per key. For each call the
// record answers one [leases.Outcome]:
//
//   - Accepted: the operation is new, and was done now.
//   - Replay: done before, with the same request: the stored answer,
//     and the effect is not run again.
//   - Conflict: the key was used before with another request.
//   - Stale: the epoch is below the newest the record has admitted for
//     the resource (Result.Newest): a newer holder has begun.
//   - InProgress: the first call with the key has not finished (it runs
//     now, or its outside effect was begun and never completed).
//
// # Effects in the database
//
// [Table.Do] runs the effect in the transaction that admits the epoch
// and stores the record: the effect's rows and the record commit
// together, or neither does.
//
//	result, err := table.Do(ctx, ops.Call{Resource: "invoices", Epoch: epoch, Key: key, Request: body},
//		func(ctx context.Context, tx *sql.Tx) (ops.Response, error) {
//			// ... your INSERTs and UPDATEs in tx ...
//			return ops.Response{Status: 201, Type: "text/plain", Body: []byte("issued\n")}, nil
//		})
//
// # Effects outside the database
//
// [Table.Begin] commits a pending record before the effect (an email, a
// call to a payment API), and [Pending.Complete] records its answer after.
// A pending record that is never completed answers InProgress for good:
// whether its effect happened is unknown, and the record never lets it
// happen a second time. Deciding what became of it (asking the payment
// API, say) is the operator's.
//
// # What it guarantees
//
// At most one effect per (resource, epoch, key): in the database, because
// the record and the effect commit in one transaction; outside, because
// the pending record commits before the effect begins. Once an epoch has
// been admitted for a resource, no call with a lower epoch is admitted:
// the newest admitted epoch is kept in a fence table (package
// leases/fence) beside the record, raised in the call's own transaction,
// whose row stays locked until the transaction ends.
//
// It cannot stop a stale holder before the newer holder's epoch has
// reached the record (the receiver learns of a newer holder only from
// its calls), nor an outside effect that a stale holder makes without
// asking the record.
//
// # Errors
//
// Outcomes are not errors: Do and Begin return a nil error for each of
// them. An error is one of: [leases.ErrInvalidInput] (nothing sent), the
// effect's own error (rolled back), [leases.ErrOutcomeUnknown] (the
// COMMIT was sent and not answered: call again with the same Call, and
// the record tells), or a failure before commit (nothing committed).
package ops
