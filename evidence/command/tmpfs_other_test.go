//go:build !linux

package command_test

import "testing"

// mountTmpfs skips t: a file system of a given size, mounted for a test,
// is Linux's tmpfs here.
func mountTmpfs(t *testing.T, _ string) string {
	t.Helper()
	t.Skip("skipped: this test mounts a tmpfs of a given size, which needs Linux")
	return ""
}
