// Package backend is what the evidence needs from a backend of package
// leases, so that the scenarios, the explorer and the command are written
// once and run on each: a place to run one scenario in (a fresh file, a
// fresh key prefix on a cluster), stores opened on that place in the
// controller's process and in every worker's, and a store the explorer
// can roll back.
package backend

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"

	"leases"
)

// Store is a backend's store: the authority and the receivers on one
// place.
type Store interface {
	Authority() leases.Authority
	Receiver(mode leases.Mode) leases.Receiver
	Guarded() leases.GuardedReceiver
	Close() error
}

// GuardedReceiver, where a receiver is named by a leases.Mode (in the
// worker protocol, in a scenario), names the guarded receiver: it is not
// the mode of a receiver.
const GuardedReceiver leases.Mode = "guarded"

// Reader is the Read of the receiver that receiver names on store.
func Reader(store Store, receiver leases.Mode) func(ctx context.Context, resource string) (leases.Record, bool, error) {
	if receiver == GuardedReceiver {
		return store.Guarded().Read
	}
	return store.Receiver(receiver).Read
}

// Kind is one backend as a binary knows it. A worker process only opens
// stores on places the controller made (Open); the controller first
// starts what the backend needs (Start), an etcd cluster for example.
type Kind interface {
	// Name is how results.json and the worker protocol call the backend.
	Name() string
	// Open opens a store on a place, given the place's Spec.
	Open(ctx context.Context, spec string) (Store, error)
	// Start readies the backend for one run; dir is a temporary directory
	// of the run's own, removed after Close.
	Start(ctx context.Context, dir string) (Running, error)
}

// Running is a backend readied for one run.
type Running interface {
	// NewPlace makes a fresh, empty place for one scenario.
	NewPlace(ctx context.Context, scenario string) (Place, error)
	// Explorable returns a fresh, empty store for the explorer.
	Explorable(ctx context.Context) (Explorable, error)
	// Close ends everything Start started.
	Close() error
}

// Failing is a Running that can fail by itself while a run uses it: a
// cluster whose member process ends unbidden, say. Failed is closed then,
// and Err says why; a run on it ends at once, with that as its error.
// Once Close has returned, Err knows of every such failure.
type Failing interface {
	Failed() <-chan struct{}
	Err() error
}

// StartInTemp readies kind for one run in a temporary directory of its
// own; end closes what Start started and then removes the directory.
func StartInTemp(ctx context.Context, kind Kind) (running Running, end func() error, err error) {
	dir, err := os.MkdirTemp("", "leases-"+kind.Name()+"-")
	if err != nil {
		return nil, nil, err
	}
	if running, err = kind.Start(ctx, dir); err != nil {
		return nil, nil, errors.Join(fmt.Errorf("start %s: %w", kind.Name(), err), os.RemoveAll(dir))
	}
	return running, func() error { return errors.Join(running.Close(), os.RemoveAll(dir)) }, nil
}

// Place is where one scenario runs.
type Place interface {
	// Spec tells a worker process how to open a store on the place.
	Spec() string
	// Close removes the place and all it holds.
	Close() error
}

// Explorable is a store the explorer can snapshot and roll back. Two
// snapshots are equal exactly when the stores hold the same state, so a
// snapshot also names a state.
type Explorable interface {
	Store
	Snapshot(ctx context.Context) ([]byte, error)
	Restore(ctx context.Context, snapshot []byte) error
}

// UserTransactions is implemented by explorable stores on which a user's
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

// Cluster is a place on a replicated backend whose members a scenario can
// stop and restart, and read one by one.
type Cluster interface {
	Place
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

// Find returns the kind called name.
func Find(kinds []Kind, name string) (Kind, error) {
	for _, k := range kinds {
		if k.Name() == name {
			return k, nil
		}
	}
	return nil, fmt.Errorf("no backend called %q", name)
}
