// Package scale holds the scale benchmark of the three backends (SQLite,
// PostgreSQL, etcd) and of etcd's own anchors: how the cost of granting,
// renewing and using leases grows with the number of leases and holders.
// It lives in the tests module, which may start etcd members and
// PostgreSQL servers; the package itself has no code. See
// docs/performance.md for the command and the results.
package scale
