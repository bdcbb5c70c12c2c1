// Package fence keeps a lease holder's transactions in your own database
// from committing once a newer holder has begun: a table of fences, one
// row per resource, kept in the same SQLite file or PostgreSQL database as
// your business rows, so that the fence row and your rows commit or roll
// back together.
//
// # Use
//
// Open the table on your database, and create it once, at setup, outside
// any business transaction:
//
//	fences, err := fence.New(db, fence.Options{Dialect: fence.PostgreSQL})
//	...
//	err = fences.Create(ctx)
//
// Then, for each lease (each tenure), begin its tenure right after the
// grant, and run every transaction that acts for the holder through it:
//
//	tenure, err := fences.Tenure(ctx, s.Lease()) // s: the holder's session
//	...
//	err = tenure.Tx(ctx, nil, func(tx *sql.Tx) error {
//		// ... your INSERTs and UPDATEs ...
//	})
//
// [Tenure] observes the lease's epoch once, in a transaction of its own:
// from its commit on, no transaction of an older tenure commits, even
// before the new holder has written anything. Each [Tenure.Tx] admits its
// transaction only while the epoch is the newest the table has seen, and
// says which of a refusal (leases.ErrStale), a failure before commit, or
// an unknown outcome ([Tenure.Resolve] resolves it) it had.
//
// A [Guard] begins tenures: a *Table here (the epoch alone), and, where
// the leases are kept in the same database, sqlite.Store and
// postgres.Store, which check the lease live on their clock too, at each
// transaction's admission and commit. Use the store's where you can.
//
// [Table.Write] is the contract's fenced receiver in your transaction
// (one value per resource per epoch: Accepted, Replay, Conflict, Stale),
// which the evidence explores; a service uses Tenure.
//
// # What it guarantees
//
// Whatever the interleaving of concurrent transactions, once a transaction
// that wrote or observed epoch e has committed, no transaction with an
// epoch below e commits an accepted write or observe after it: the fence
// never goes down, and at most one value is ever committed per resource
// and epoch. Your business rows share
// the fence row's fate: if the transaction rolls back, neither is there.
//
// Write, the tenure's observe and each admit make the accepting decision in one statement, a
// conditional upsert whose condition is the rule itself, so that the
// database compares and stores under the row's lock; a rejected write then
// reads the row it was rejected by and names the outcome. This holds under
// each database's concurrency control:
//
//   - PostgreSQL, READ COMMITTED (the default): the upsert waits for any
//     transaction that holds the row, then evaluates its condition on the
//     latest committed version and locks the row, also when the condition
//     is false. A read-then-write would be wrong here: two transactions
//     would both read the old row and both write.
//   - PostgreSQL, REPEATABLE READ or SERIALIZABLE: when the row changed
//     after the transaction's snapshot, the statement fails with a
//     serialization failure (SQLSTATE 40001), and under SERIALIZABLE the
//     commit may too. It is returned unchanged (wrapped): roll back and
//     retry the whole transaction.
//   - SQLite: one writer at a time, on the latest version of the file.
//     Open the database with _txlock=immediate (the modernc.org/sqlite and
//     mattn/go-sqlite3 drivers' DSN parameter), so that every transaction
//     takes the write lock at BEGIN and waits on busy_timeout. A DEFERRED
//     transaction that reads first and then reaches the fence may fail
//     with SQLITE_BUSY when it cannot upgrade to a writer; the fence never
//     accepts wrongly, it only fails: roll back and retry.
//
// SQLite 3.37 or later is needed (RETURNING and STRICT tables); PostgreSQL
// 9.5 or later (ON CONFLICT).
//
// # Errors
//
// The fence's statements run inside your transaction and the fence never
// commits or rolls back. Invalid input ([leases.ErrInvalidInput]) is
// refused before any statement runs. Any other error is a failed
// statement, returned as the driver reported it (wrapped with what the
// fence was doing, so errors.Is and errors.As still see the driver's
// error and the context's): the transaction is then unusable (PostgreSQL
// aborts it) and must be rolled back. The commit is yours, and so is its
// outcome: when Commit fails, you do not know whether it took effect. For
// a Write, the fence row tells you once the transaction can no longer
// commit: if it holds your epoch and value, your transaction committed,
// business rows and all; if it holds a lower epoch, or your epoch with
// another value, it did not. A [Tenure] does this for you: its Tx says
// which kind of outcome it had, and [Tenure.Resolve] resolves an unknown
// one, waiting while the database may still commit it.
//
// # What it does not protect
//
// Only what your transaction writes to the same database is fenced.
// Effects outside the transaction - a message sent, a file written, a call
// to another service, rows in another database - happen whether or not
// the transaction commits, and a stale holder can make them before its
// write is rejected. And as with every fenced receiver, a stale holder's
// write is accepted until a newer epoch has reached the table; a tenure
// closes that gap only from the moment it begins (a store's tenure, which
// checks the lease, closes it).
package fence
