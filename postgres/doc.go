// Package postgres is the PostgreSQL backend of package leases: the lease
// authority, the fenced, unfenced and guarded receivers, kept in tables
// of one PostgreSQL database, so that any number of processes on any
// number of machines share them, and a team that runs PostgreSQL needs
// nothing else. It speaks database/sql only: open the *sql.DB with the
// driver of your choice (the tests use pgx's stdlib).
//
// # Use
//
// Create the tables once, at setup:
//
//	store, err := postgres.New(db, postgres.Options{})
//	...
//	err = store.Create(ctx)
//
// Then hand store.Lessor() to package session: leases on the server's
// clock ([ServerClock]), so that no caller says what time it is and
// holders whose clocks disagree still never overlap. store.Authority()
// is the same authority with explicit ticks (leases.Authority), for the
// evidence and for tests. Where your own tables are in the same database,
// [ServerClock.AdmitLive] and [ServerClock.LiveTenure] check, inside your
// own transaction, that the lease is still the live one on the server's
// clock and raise a fence of package leases/fence, so that a holder
// paused past its lease's expiry cannot commit after the next holder was
// granted: the gap is closed.
//
// # Tables
//
// Under Options.Prefix (DefaultPrefix, "leases_"), each kind apart:
//
//	<prefix>authority  one row per resource: the last epoch, the holder
//	                   (NULL once released), the grant, expiry and last
//	                   ticks; a released resource keeps its row, which
//	                   keeps its epoch from being granted again
//	<prefix>fenced     the fenced receiver's records (a fence table)
//	<prefix>unfenced   the unfenced receiver's records
//	<prefix>guarded    the guarded receiver's records (a fence table)
//
// # Decisions and concurrency
//
// Every decision is one transaction: it locks the resource's row, reads
// it (and, on the server's clock, the clock, after the lock), asks the
// rules that every backend shares what to do, and writes the answer.
// The first acquire of a resource, which has no row to lock, inserts its
// row with ON CONFLICT DO NOTHING: when another first acquire inserted
// one meanwhile, nothing is written (under READ COMMITTED after waiting
// for that transaction) and the decision is made again, in a new
// transaction, on that row. This holds under each isolation level:
//
//   - READ COMMITTED (PostgreSQL's default): a decision that meets a row
//     another transaction holds waits for it, then decides on the
//     version that transaction committed. Nothing fails.
//   - REPEATABLE READ and SERIALIZABLE: a decision that meets a row
//     changed after its snapshot fails with a serialization failure
//     (SQLSTATE 40001), as does one whose first row lost its race; it
//     committed nothing, and the store tries it again inside the call,
//     up to Options.Retries times, before returning it as a failure
//     before commit.
//
// # Errors
//
// A call's error is one of package leases' three kinds: a refusal
// (leases.IsRefusal), a failure before commit (nothing changed: the
// statement or the connection failed, the context ended before COMMIT
// was sent, or PostgreSQL answered the COMMIT with a serialization
// failure, which means it rolled back), or an unknown outcome
// (leases.ErrOutcomeUnknown: the COMMIT was sent and no answer came, or
// another error did). The store goes on after an unknown outcome: every
// decision is made on what the server holds.
package postgres
