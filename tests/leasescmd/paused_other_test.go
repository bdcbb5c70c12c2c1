//go:build !unix

package leasescmd_test

import (
	"testing"
	"time"
)

var pausedStops []time.Duration

// runWithLeasesStopped needs SIGSTOP, which this platform has not.
func runWithLeasesStopped(t *testing.T, _ []string, _ ...time.Duration) {
	t.Skip("skipped: no SIGSTOP here to stop leases with")
}
