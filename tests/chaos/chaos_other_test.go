//go:build !linux

package chaos_test

import (
	"runtime"
	"testing"
)

// The chaos test's controller stops and kills processes and a PostgreSQL
// server with Linux's signals, parent-death signal and pidfds.
func TestServicePathUnderChaos(t *testing.T) {
	workerRole.MaySkip()
	t.Skipf("the chaos test runs on Linux only, not on %s", runtime.GOOS)
}
