// Package chaos is the chaos test of the service path: worker processes
// that do what docs/service.md tells a service to do (session.Wait on a
// shared lessor, fence.Tenure in their own database, transactions that
// insert business rows, Resolve for each whose outcome is unknown,
// Close), while the test stops them with SIGSTOP at the points that
// matter and at random, cuts a transaction off as its COMMIT goes out
// with its backend stopped, kills them with SIGKILL and starts them
// again, and kills the database server and restarts it. In
// the etcd variant the lessor is a three-member etcd cluster, whose
// leader the test cuts off from the others, kills, and pauses, and whose
// followers it pauses.
//
// Every worker records each operation it makes, with the wall-clock
// times of its invocation and its return, as JSON lines on its standard
// output (a history.Recorder). From those records and from what the
// databases hold afterwards, package history checks the run, as it does
// the stress tests': the safety properties of the path directly (epochs
// in commit order, the fence, who was granted what, the authority's
// tenures, the session's checks and its end, every Resolve's answer
// against the rows; in the guarded variant, each row's commit timestamp
// against its lease's expiry on the server's clock), and the whole
// history of grants, renewals, releases and fenced transactions for
// linearizability against a sequential model of the authority and the
// fence (github.com/anishathalye/porcupine).
//
// The worker role is portable code; the controller, which sends
// signals and runs PostgreSQL and etcd, runs on Linux.
package chaos
