//go:build !linux

package main

import "testing"

// withoutPermission needs strace, which only Linux has: where chmod binds
// no one (root, Windows) the case is skipped.
func withoutPermission(t *testing.T, _ string, _ []string) result {
	t.Skip("no directory this process may not write (root, or Windows), and no strace to make one")
	return result{}
}
