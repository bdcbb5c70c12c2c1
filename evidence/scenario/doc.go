// Package scenario runs the hand-picked schedules of the evidence: a
// controller that holds the logical clock drives workers A and B, separate
// OS processes (package worker), through a script on a fresh sandbox of a
// backend, records every step with the receiver's record after it, and
// computes the verdicts from the steps.
//
// Part of the evidence (what cmd/run-experiment reruns), not of the
// library: no API promise.
package scenario
