// Package stress holds the tests that put many of the evidence's SQLite
// worker processes (package evidence/worker) under contention, pauses
// and kills. Both tests share one driver: a fleet of worker processes on
// one file (start, send, receive, stop, continue, kill, restart) that
// records every request, its reply and every kill into a history of
// package history, reads the file afterwards into the history's final
// state, and has package history check it: its invariants (at most one
// live lease per tick, epochs granted once and in order, the fence never
// going down, one value per epoch, no write accepted below a committed
// epoch, the final rows as the replies allow, PRAGMA integrity_check)
// and porcupine against its model of the authority and the fenced
// receiver.
//
// TestLoadKeepsEveryInvariant is the fleet without faults: every worker
// contends at once, round after round. TestPauseAndKill is the fleet
// with faults: SIGSTOP and SIGKILL at random moments, on Linux, where
// /proc shows each thread's state and who holds SQLite's write lock.
// The package has no code but its tests; its TestMain lets the test
// binary play the worker role (package roles).
package stress
