package scale_test

import (
	"os"
	"testing"

	"leases/etcdcluster"
	"leases/internal/roles"
)

// TestMain lets this binary play an etcd member (etcdcluster re-executes
// it), and stops the run's cluster and server after the last test.
func TestMain(m *testing.M) {
	roles.Run()
	// The benchmark runs only when asked (LEASES_SCALE): no cluster then.
	etcdcluster.MemberRole.MaySkip()
	code := m.Run()
	if cluster.c != nil {
		_ = cluster.c.Close()
	}
	if server.s != nil {
		_ = server.s.Close()
	}
	os.Exit(roles.CheckUnused(code))
}
