package etcdstore_test

import (
	"reflect"
	"slices"
	"testing"

	"leases/cmd/run-experiment/etcdbackend"
	"leases/evidence/backend"
	"leases/evidence/explore"
)

// The exploration on etcd finds what it finds on SQLite, at the default
// bounds: the same schedules, counts and shortest counterexamples, step
// for step. The command explores smaller bounds on etcd, to stay quick;
// this is where the default ones are shown to agree.
func TestExplorationOnEtcdFindsSQLitesFigures(t *testing.T) {
	if testing.Short() || raceDetector {
		t.Skip("-short or -race: the default bounds take tens of seconds on etcd, minutes under -race; the plain run covers it")
	}
	ctx := testContext(t)
	onSQLite, _, err := explore.Explore(ctx, sqliteRunning(t), explore.DefaultBounds)
	if err != nil {
		t.Fatal(err)
	}
	running, err := etcdbackend.Backend{}.Start(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = running.Close() })
	onEtcd, stats, err := explore.Explore(ctx, running, explore.DefaultBounds)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("on etcd: %d steps run, %d states, %d rollbacks", stats.StepsRun, stats.States, stats.Restores)
	// The guarded write in the user's transaction needs a database whose
	// transactions see the authority's rows: explored on SQLite alone.
	onSQLite.Protocols = slices.DeleteFunc(onSQLite.Protocols, func(p explore.ProtocolFigures) bool {
		return p.Protocol == explore.TxGuardedProtocol
	})
	if !reflect.DeepEqual(onEtcd, onSQLite) {
		for i := range onSQLite.Protocols {
			if i < len(onEtcd.Protocols) && !reflect.DeepEqual(onEtcd.Protocols[i], onSQLite.Protocols[i]) {
				t.Errorf("%s: etcd found\n%+v\nSQLite found\n%+v", onSQLite.Protocols[i].Protocol, onEtcd.Protocols[i], onSQLite.Protocols[i])
			}
		}
		t.Fatal("the exploration differs between etcd and SQLite")
	}
}

func sqliteRunning(t *testing.T) backend.Deployment {
	t.Helper()
	running, err := backend.SQLite{}.Start(testContext(t), "")
	if err != nil {
		t.Fatal(err)
	}
	return running
}
