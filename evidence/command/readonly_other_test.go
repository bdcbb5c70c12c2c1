//go:build !linux

package command

import "testing"

// readOnlyFileSystem skips t: root writes anywhere, and a read-only file
// system for a test is a Linux tmpfs here.
func readOnlyFileSystem(t *testing.T, _ string) {
	t.Helper()
	t.Skip("skipped: root writes anywhere, and a read-only file system for a test needs Linux")
}
