// Package etcd is the etcd backend of package leases: the authority, the
// fenced and unfenced receivers and the guarded receiver, kept as keys of
// an etcd cluster, so that any number of processes on any number of
// machines share them for as long as a quorum of the cluster lives.
//
// Every decision is made by package leases' rules on what etcd holds, and
// written with one etcd transaction that commits only if every key it
// decided on is still as it was read (compared by ModRevision): a write
// that slipped in between makes the transaction lose, and the decision is
// made again on what etcd then holds. Nothing is half-applied, and nothing
// but the keys below is ever written: no etcd leases, no lock keys.
//
// Keys, under Options.Prefix (each kind apart, so that a receiver can
// never overwrite the authority's state or another receiver's):
//
//	<prefix>authority/<resource>  the lease row: epoch, holder, ticks
//	<prefix>fenced/<resource>     the fenced receiver's record
//	<prefix>unfenced/<resource>   the unfenced receiver's record
//	<prefix>guarded/<resource>    the guarded receiver's record
//
// Values are JSON. A released resource keeps its row: the row is what
// keeps its epoch from being handed out again.
//
// Every request requires a leader (clientv3.WithRequireLeader): a member
// that has lost contact with its leader (cut off from the others, or
// while they elect one) refuses it on arrival instead of holding it until
// etcd's own request timeout, and the store asks again, which the client
// sends to the next member. And every call is bounded (Options.CallTimeout),
// which cuts a call that a member holds because it still believes it
// leads. See transaction.go for which failure is which kind of error.
package etcd

import (
	"context"
	"errors"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"leases"
)

// DefaultPrefix is the key prefix of a Store whose Options leave it empty.
const DefaultPrefix = "/leases/"

// DefaultCallTimeout bounds each call of a Store whose Options leave
// CallTimeout zero.
//
// Why one second: a healthy call is one or two round trips to the leader
// and a Raft commit, milliseconds (etcd itself warns of a request that
// takes 100 ms); a call that takes a second is stuck, and the common way
// to be stuck is a member that still believes it leads after it was cut
// off from the others, which holds every request until etcd's server-side
// request timeout (5 s plus two election timeouts). One second is also
// etcd's default election timeout, within which the others elect a new
// leader: cutting the call then lets the next one reach it. Set it higher
// for a cluster whose healthy commits are slow (a slow disk, members far
// apart), lower for a cluster with a shorter election timeout.
const DefaultCallTimeout = time.Second

// Options tune a Store; the zero value is the default.
type Options struct {
	// Prefix is put in front of every key the store reads or writes;
	// DefaultPrefix when empty. Stores with the same prefix on the same
	// cluster share their leases and records.
	Prefix string
	// CallTimeout bounds each call (Acquire, Renew, Release, Holder,
	// Write, Observe, Read), within the caller's context:
	// DefaultCallTimeout when zero. A call cut before its write was sent
	// is a failure before commit; after, an unknown outcome
	// (leases.ErrOutcomeUnknown). Either matches ErrCallTimeout and
	// context.DeadlineExceeded.
	CallTimeout time.Duration
}

// ErrCallTimeout is the cause of a call cut by Options.CallTimeout.
var ErrCallTimeout = errors.New("etcd call took longer than Options.CallTimeout")

// ErrNoLeader reports a request that the member it reached refused
// because it had no leader (it was cut off from the others, or they were
// electing one), before anything was proposed: nothing changed. The store
// asks again until the call's bound; the error says so when no member
// took the request by then.
var ErrNoLeader = errors.New("no leader")

// Store is one process's handle on the leases and records kept in an etcd
// cluster under one prefix. It is safe for concurrent use.
//
// Unlike the SQLite store, a Store goes on after an outcome it could not
// learn (leases.ErrOutcomeUnknown): every decision is made on what etcd
// holds at the moment of its transaction, never on anything this process
// remembers, so what the failed transaction did or did not do is seen by
// the next one. The store's cache of recent values (see cache.go) is a
// guess that every transaction checks.
type Store struct {
	client      *clientv3.Client
	prefix      string
	callTimeout time.Duration
	cache       cache
	following   sync.Once // the watch that keeps the cache up to date (watch.go)
}

// New returns a store on client, which the caller builds with
// clientv3.New (endpoints, dial timeout, TLS) and closes after the last
// call. New itself talks to nobody.
func New(client *clientv3.Client, opts Options) *Store {
	s := &Store{client: client, prefix: opts.Prefix, callTimeout: opts.CallTimeout}
	if s.prefix == "" {
		s.prefix = DefaultPrefix
	}
	if s.callTimeout <= 0 {
		s.callTimeout = DefaultCallTimeout
	}
	return s
}

// bound is the context of one call: ctx, requiring a leader of every
// member it reaches, and ending at the call's bound.
func (s *Store) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(clientv3.WithRequireLeader(ctx), s.callTimeout, ErrCallTimeout)
}

// Authority returns the lease authority kept in this store.
func (s *Store) Authority() leases.Authority { return &authority{store: s} }

// Receiver returns a receiver kept in this store, fenced or not. The two
// modes keep their records under keys of their own.
func (s *Store) Receiver(mode leases.Mode) leases.Receiver { return &receiver{store: s, mode: mode} }

// Guarded returns the guarded receiver kept in this store: it reads the
// authority's row for every write, in the write's own transaction.
func (s *Store) Guarded() leases.GuardedReceiver { return &guarded{store: s} }

// Kinds of keys, each under a prefix of its own.
const (
	authorityKind = "authority/"
	fencedKind    = "fenced/"
	unfencedKind  = "unfenced/"
	guardedKind   = "guarded/"
)

func (s *Store) key(kind, resource string) string { return s.prefix + kind + resource }
