// Package worker is the evidence's worker processes and their line
// protocol: the controller starts a worker by re-executing its own binary
// in the worker role (package roles: the binary calls Register, then
// roles.Run, first thing), sends one JSON request per line on the
// worker's stdin and reads one reply per line from its stdout; the worker
// opens a store of its own on the scenario's sandbox and does what it is
// told. A worker whose input ends exits, so that no worker outlives its
// controller.
//
// Part of the evidence (what cmd/run-experiment reruns), not of the
// library: no API promise.
package worker
