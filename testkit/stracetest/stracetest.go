// Package stracetest finds strace for the tests that inject syscall
// faults with it (strace -e inject=...).
//
// A test kit: used by tests only, never by shipped code (the library, the
// evidence as cmd/run-experiment links it, the commands).
package stracetest

import (
	"bytes"
	"os"
	"os/exec"
	"testing"
)

// Path returns strace's path, or skips t, in one line, where strace is
// missing or may not trace (ptrace not permitted, as in some
// containers).
func Path(t testing.TB) string {
	t.Helper()
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("strace is not installed: this fault injection needs it")
	}
	if out, err := exec.Command(strace, "-f", "-o", os.DevNull, "true").CombinedOutput(); err != nil {
		t.Skipf("strace cannot trace here (ptrace not permitted?): %v %s", err, bytes.TrimSpace(out))
	}
	return strace
}
