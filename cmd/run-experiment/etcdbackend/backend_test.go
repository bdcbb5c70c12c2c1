package etcdbackend

import (
	"context"
	"os"
	"testing"

	"leases/evidence/backend"
	"leases/internal/roles"
	"leases/testkit/testctx"
)

func TestMain(m *testing.M) {
	roles.Run()
	os.Exit(roles.CheckUnused(m.Run()))
}

// The failover scenario's sandbox kills the leader's process: the member is
// down, the others lead and serve, and no failure is reported; restarted,
// it is a new process on the same member.
func TestStopLeaderKillsTheLeadersProcess(t *testing.T) {
	ctx, r := start(t)
	p, err := r.NewSandbox(ctx, "failover")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	sandbox := p.(backend.Cluster)
	c := r.cluster
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := c.PID(leader)
	if err := sandbox.StopLeader(ctx); err != nil {
		t.Fatal(err)
	}
	if _, up := c.PID(leader); up {
		t.Fatalf("member %d (pid %d) is still up after StopLeader", leader, pid)
	}
	if next, err := c.Leader(ctx); err != nil || next == leader {
		t.Fatalf("leader after StopLeader: %d, %v; want another than %d", next, err, leader)
	}
	if err := sandbox.RestartStopped(ctx); err != nil {
		t.Fatal(err)
	}
	if again, up := c.PID(leader); !up || again == pid {
		t.Fatalf("member %d after RestartStopped: pid %d, up %v; want a new process", leader, again, up)
	}
	if err := r.Err(); err != nil {
		t.Fatalf("a member the scenario killed counts as a failure: %v", err)
	}
}

// start starts the backend's cluster for the test, closed when it ends,
// and returns the test's context with it.
func start(t *testing.T) (context.Context, *deployment) {
	t.Helper()
	ctx := testctx.Context(t)
	r, err := Backend{}.Start(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return ctx, r.(*deployment)
}
