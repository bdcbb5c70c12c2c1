// Package postgres holds the tests and benchmarks of package leases/fence
// on a real PostgreSQL server (see package pgtest): the checks every
// database passes (internal/fencetest), the same load under READ
// COMMITTED and SERIALIZABLE, and every interleaving of two transactions
// under READ COMMITTED. It is a module of its own so that the root
// module, and everyone who uses the fence with SQLite only, does not
// depend on a PostgreSQL driver: the fence itself speaks database/sql.
package postgres
