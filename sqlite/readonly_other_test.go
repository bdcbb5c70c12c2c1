//go:build !linux

package sqlite_test

import "testing"

// makeImmutable skips t: making a file unwritable for root takes Linux's
// immutable file flag here.
func makeImmutable(t *testing.T, _ string) {
	t.Helper()
	t.Skip("skipped: making a file read-only for root uses Linux's immutable flag (chattr +i); run as another user")
}
