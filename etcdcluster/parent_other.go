//go:build !linux

package etcdcluster

// dieWithParent does nothing here: only Linux has a parent-death signal.
// A member exits when its input ends, which it does when the parent dies;
// a member paused (SIGSTOP) when its parent dies stays until it is
// continued, and then exits.
func dieWithParent() error { return nil }
