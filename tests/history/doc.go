// Package history is the one recorder and the one checker of the tests
// that run workers under faults: the load and pause-and-kill tests
// (tests/stress: the evidence's SQLite workers, driven by the test) and
// the chaos test of the service path (tests/chaos: workers that run
// session, fence and their own transactions). Each test makes its
// workers and its faults; this package records what they did and
// decides whether it was allowed.
//
// # The record
//
// A history is a list of Records: a "call" (the operation and what it
// was given: resource, holder, epoch, the caller's tick Now and TTL, a
// value), its "ret" (a Result named by ResultOf, the lease, the
// receiver's record, the error), and the events around them ("commit",
// "done", "starved", "lessor-commit", "killed"). Every record carries T,
// when it was made on the history's one clock, and Tick, the clock the
// calls count on at that moment: in the chaos test the wall clock in
// nanoseconds (every process on the machine reads it alike) and
// clock.Wall's tick; in the stress tests the controller's count of its
// own sends, replies and kills, and the tick it gives its workers. T is
// all the checker orders by: a call that returned before another was
// made came first.
//
// A Recorder makes the records of one worker: it numbers the calls,
// stamps T and Tick, and hands each record to a sink, in order. A chaos
// worker's sink writes JSON lines on its standard output, which the
// controller reads back with History.Read; the stress controller, which
// makes its workers' calls through their pipes, records them itself,
// one Recorder a process, into History.Add. When a controller kills a
// worker it adds a "killed" record once the process is gone, which
// closes the calls still open: their outcome is unknown. Where a call's
// effects die with its process (History.KillEndsCalls: SQLite files the
// process writes itself, the stress tests), a killed call took effect
// before its kill or never; elsewhere (a database server, an etcd
// cluster) it may take effect at any time after its call. An answer
// "outcome unknown" is open to the end either way.
//
// The test adds what the stores hold at the end: the lessor's epochs,
// the fence table, the business rows and their counter (the chaos
// test), the whole lease rows, the receiver's records and
// integrity_check (the stress tests), the stops, the etcd cluster's
// writes of the lease rows, the COMMITs held with their backend stopped.
//
// # The checker
//
// Verify runs every Check and porcupine, and Verdict.Report fails the
// test with what they found; one list serves every history, and a check
// that looks at calls a history does not have finds nothing in it.
//
// Porcupine checks the whole history against Model, a sequential model
// of each resource written from the contract, not from internal/rules:
// the authority's lease row (acquire, renew, release, holder; the
// caller's ticks, or the server's where it chose them, stepServer), the
// fence (the service path's tenure, count and transaction, or the
// evidence's fenced receiver: write, fence, read) and, last, a look at
// what the stores hold. A failure before commit is left out; an
// operation of unknown outcome may or may not take effect; a refusal
// whose answer does not carry the live lease or the last tick (the
// stress workers' pipe carries neither) is matched on its result alone.
//
// The invariants say in one line what went wrong, where porcupine says
// only that no order explains the history: the authority's tenures
// rebuilt from every answer (grants as asked, renewals and releases only
// of a live lease, epochs once and in grant order, no gap but one an
// acquire of unknown outcome may have taken, no two live leases at one
// tick, the final rows the answers allow); the fenced receiver (outcomes
// that agree with the record, one value per epoch, a fence that never
// goes down, the final record); the service path's fence and rows
// (commit order, no stale row, transactions and Resolve telling the
// truth); the session (no live Check after the expiry, Done on time,
// renewals within the session, Wait's errors and sessions, every grant
// reported or released); and the guard on the server's clock. The
// figures the tests log (Latenesses, ReleaseToGrant, AfterFault,
// Resolutions, HeldPastExpiry, CommitMargins) are read from the same
// history.
package history
