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
package etcd

import (
	clientv3 "go.etcd.io/etcd/client/v3"

	"leases"
)

// DefaultPrefix is the key prefix of a Store whose Options leave it empty.
const DefaultPrefix = "/leases/"

// Options tune a Store; the zero value is the default.
type Options struct {
	// Prefix is put in front of every key the store reads or writes;
	// DefaultPrefix when empty. Stores with the same prefix on the same
	// cluster share their leases and records.
	Prefix string
}

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
	client *clientv3.Client
	prefix string
	cache  cache
	// optimistic sends the first transaction on the cached guess rather
	// than after a read; see cache.go.
	optimistic bool
}

// New returns a store on client, which the caller builds with
// clientv3.New (endpoints, dial timeout, TLS) and closes after the last
// call. New itself talks to nobody.
func New(client *clientv3.Client, opts Options) *Store {
	prefix := opts.Prefix
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return &Store{client: client, prefix: prefix, optimistic: true}
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
