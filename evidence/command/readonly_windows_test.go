package command

import (
	"os"
	"testing"
)

// readOnlyDir skips t: on Windows a directory's read-only attribute does
// not stop a file being made in it.
func readOnlyDir(t *testing.T) string {
	t.Helper()
	t.Skip("skipped: a directory in which no file can be made takes an access list on Windows")
	return os.DevNull
}
