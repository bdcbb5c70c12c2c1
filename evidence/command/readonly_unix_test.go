//go:build unix

package command

import (
	"os"
	"testing"
)

// readOnlyDir returns an empty directory in which this process cannot
// make a file: one without write permission for an ordinary user; for
// root, whom permissions do not stop, a read-only file system (see
// readOnlyFileSystem), or t is skipped where none can be mounted.
func readOnlyDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if os.Geteuid() == 0 {
		readOnlyFileSystem(t, dir)
		return dir
	}
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(dir, 0o755) }) // or t.TempDir cannot remove it
	return dir
}
