//go:build !linux

package stress

import "testing"

// skipWithoutProcfs skips t: only Linux's /proc lists the state of each
// thread of a process and the holders of POSIX locks.
func skipWithoutProcfs(t *testing.T) {
	t.Helper()
	t.Skip("skipped: this test reads /proc (each thread's state, the holders of POSIX locks), which only Linux has")
}

func threadStates(t *testing.T, _ int) string {
	t.Helper()
	t.Fatal("threadStates needs Linux's /proc")
	return ""
}

func writeLockHolder(t *testing.T, _ string) int {
	t.Helper()
	t.Fatal("writeLockHolder needs Linux's /proc")
	return 0
}
