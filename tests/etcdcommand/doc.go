// Package etcdcommand holds the tests of the command run-experiment's
// edges on etcd, tried from outside: a member whose system calls fail
// (strace), a member that dies in the middle of a run, a signal during
// the failover scenario, and a run killed outright. The command runs as a
// child process of the test binary, which plays the command, its workers
// and its etcd members (package roles); the package itself has no code.
package etcdcommand
