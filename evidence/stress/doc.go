// Package stress holds the tests that put many SQLite worker processes
// under contention, pauses and kills, with the invariants checked over
// every reply and over the file afterwards. Both tests share one harness:
// a fleet of worker processes on one file (start, send, receive, stop,
// continue, kill, restart), one record of every request and what became
// of it, and one checker (at most one live lease per tick, epochs granted
// once and in order, the fence never going down, one value per epoch, no
// write accepted below a committed epoch, PRAGMA integrity_check).
//
// TestLoadKeepsEveryInvariant is the harness without faults: every worker
// contends at once, round after round. TestPauseAndKill is the harness
// with faults: SIGSTOP and SIGKILL at random moments, on Linux, where
// /proc shows each thread's state and who holds SQLite's write lock.
// The package has no code but its tests; its TestMain lets the test binary
// play the worker role (package roles).
//
// Part of the evidence's own tests (the evidence is what cmd/run-experiment
// reruns), not of the library: no API promise.
package stress
