// Package stopwait learns that a child process has stopped (SIGSTOP)
// without collecting it: kill(2) returns before the child stops, and
// whoever stops a process to act on it (pause a worker, list a server's
// backends) must wait for the kernel to say it has.
package stopwait
