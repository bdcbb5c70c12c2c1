// Package backend is what the evidence needs from a backend of package
// leases, so that the scenarios, the explorer and the command are written
// once and run on each. The words, as database/sql's driver has them:
//
//   - a Driver is a backend as a binary knows it (SQLite; etcd);
//   - a Deployment is a backend started for one run (nothing for SQLite;
//     a cluster of member processes for etcd);
//   - a Sandbox is a fresh, empty sandbox for one scenario (a file in a
//     temporary directory; a key prefix on the cluster), and its Address
//     is what a worker process opens a store with;
//   - a Rewindable store is one the explorer can snapshot and roll back;
//   - a Receiver names a receiver of a store, the guarded one included.
//
// Part of the evidence (what cmd/run-experiment reruns), not of the
// library: no API promise.
package backend

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"time"

	"leases"
)

// Store is a backend's store: the authority and the receivers in one
// sandbox.
type Store interface {
	Authority() leases.Authority
	Receiver(mode leases.Mode) leases.Receiver
	Guarded() leases.GuardedReceiver
	Close() error
}

// Receiver names one of a store's receivers where the evidence names one
// (a scenario, the worker protocol, results.json): the fenced or the
// unfenced receiver, whose names are their leases.Mode, or the guarded
// receiver, which has no mode.
type Receiver string

// The receivers of a store.
const (
	Fenced   = Receiver(leases.Fenced)
	Unfenced = Receiver(leases.Unfenced)
	Guarded  = Receiver("guarded")
	// HTTPTool is no receiver of the store: a tool server's record of
	// operations (package leases/ops behind leases/httpfence) in a
	// database of the tool's own. The store's receivers hold nothing.
	HTTPTool = Receiver("http-tool")
)

// Mode is the receiver's leases.Mode; the guarded receiver and the tool
// have none.
func (r Receiver) Mode() (mode leases.Mode, ok bool) {
	return leases.Mode(r), r == Fenced || r == Unfenced
}

// Reader is the Read of the receiver that receiver names on store; for
// the tool, which keeps nothing in the store, that of the fenced
// receiver, which stays empty.
func Reader(store Store, receiver Receiver) func(ctx context.Context, resource string) (leases.Record, bool, error) {
	if receiver == HTTPTool {
		return store.Receiver(leases.Fenced).Read
	}
	mode, ok := receiver.Mode()
	if !ok {
		return store.Guarded().Read
	}
	return store.Receiver(mode).Read
}

// Driver is one backend as a binary knows it. A worker process only opens
// stores in sandboxes the controller made (Open); the controller first
// starts what the backend needs (Start), an etcd cluster for example.
type Driver interface {
	// Name is how results.json and the worker protocol call the backend.
	Name() string
	// Open opens a store in a sandbox, given the sandbox's Address.
	Open(ctx context.Context, address string) (Store, error)
	// Start readies the backend for one run; dir is a temporary directory
	// of the run's own, removed after Close.
	Start(ctx context.Context, dir string) (Deployment, error)
}

// Deployment is a backend started for one run.
type Deployment interface {
	// NewSandbox makes a fresh, empty sandbox for one scenario.
	NewSandbox(ctx context.Context, scenario string) (Sandbox, error)
	// Rewindable returns a fresh, empty store for the explorer.
	Rewindable(ctx context.Context) (Rewindable, error)
	// Close ends everything Start started.
	Close() error
}

// Failing is a Deployment that can fail by itself while a run uses it: a
// cluster whose member process ends unbidden, say. Failed is closed then,
// and Err says why; a run on it ends at once, with that as its error.
// Once Close has returned, Err knows of every such failure.
type Failing interface {
	Failed() <-chan struct{}
	Err() error
}

// Remote is implemented by deployments whose stores are served by
// processes of their own (etcd's members): every call of a store is a
// round trip, and the server serves several stores' calls at once. The
// explorer explores its protocols side by side there. In this process
// (SQLite), each protocol keeps a core busy, and side by side they took
// 1.8x the CPU and 1.9x the time (measured, the explorer's benchmark).
type Remote interface {
	Remote()
}

// Floored is implemented by drivers that can measure, on this machine,
// what a run's parts cost at the least on their backend, for the
// command's --timings: a transaction that commits, one that only reads
// (each one operation of a scenario), an explorer's step, and on a
// cluster its start, an election and a member's restart (Floors).
type Floored interface {
	Floors(ctx context.Context) (Floors, error)
}

// Floors are what a backend's transactions cost at the least: bare ones,
// each measured by itself. On a cluster also what its own steps cost
// when nothing else runs: starting it, stopping its leader until the
// others serve again (an election), and restarting that member.
type Floors struct {
	Write, Read, Step        time.Duration
	Start, Election, Restart time.Duration
	// OpenWrites and OpenReads are the transactions of opening a
	// scenario's stores: the controller's (which on SQLite creates the
	// two tables: two that commit) and each worker's (which finds them
	// there: two that read).
	OpenWrites, OpenReads int
}

// StartInTemp starts driver's backend for one run in a temporary
// directory of its own; end closes what Start started and then removes
// the directory.
func StartInTemp(ctx context.Context, driver Driver) (deployment Deployment, end func() error, err error) {
	dir, err := os.MkdirTemp("", "leases-"+driver.Name()+"-")
	if err != nil {
		return nil, nil, err
	}
	if deployment, err = driver.Start(ctx, dir); err != nil {
		return nil, nil, errors.Join(fmt.Errorf("start %s: %w", driver.Name(), err), os.RemoveAll(dir))
	}
	return deployment, func() error { return errors.Join(deployment.Close(), os.RemoveAll(dir)) }, nil
}

// Sandbox is where one scenario runs.
type Sandbox interface {
	// Address tells a worker process how to open a store in the sandbox.
	Address() string
	// Close removes the sandbox and all it holds.
	Close() error
}

// Observed is implemented by sandboxes that give the controller its own
// store (the observer, which reads the receiver after every step) on a
// connection the deployment holds for the whole run, rather than have it
// open one per scenario: on etcd a new client of every member cost 7 ms
// of CPU and a round trip (measured). The store's Close leaves that
// connection open. Elsewhere the controller opens its store as a worker
// does (Driver.Open).
type Observed interface {
	Observer() Store
}

// Rewindable is a store the explorer can snapshot and roll back. Two
// snapshots are equal exactly when the stores hold the same state, so a
// snapshot also names a state.
type Rewindable interface {
	Store
	Snapshot(ctx context.Context) ([]byte, error)
	Restore(ctx context.Context, snapshot []byte) error
}

// UserTransactions is implemented by rewindable stores on which a user's
// own transaction sees the authority's rows, so that the guarded write in
// the user's transaction (the lease check and the fence in one
// transaction of the user's) can be explored on them: SQLite's.
type UserTransactions interface {
	// UserDB is a handle on the store's database for the user's
	// transactions (and the user's tables).
	UserDB() *sql.DB
	// LiveIn reports whether held is the authority's live lease at tick
	// now, on the rows tx sees.
	LiveIn(ctx context.Context, tx *sql.Tx, held leases.Lease, now int64) (bool, error)
}

// Cluster is a sandbox on a replicated backend whose members a scenario can
// stop and restart, and read one by one.
type Cluster interface {
	Sandbox
	// Members is how many members the cluster has.
	Members() int
	// StopLeader stops the member that leads now, as a crash would, and
	// returns once the others have elected a leader.
	StopLeader(ctx context.Context) error
	// RestartStopped restarts the stopped member and returns once it has
	// caught up with the leader.
	RestartStopped(ctx context.Context) error
	// OpenMember opens a store whose reads are served by member i alone.
	OpenMember(ctx context.Context, i int) (Store, error)
}

// Find returns the driver called name.
func Find(drivers []Driver, name string) (Driver, error) {
	for _, d := range drivers {
		if d.Name() == name {
			return d, nil
		}
	}
	return nil, fmt.Errorf("no backend called %q", name)
}
