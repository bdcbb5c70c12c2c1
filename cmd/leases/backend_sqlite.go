package main

import (
	"context"
	"errors"
	"io/fs"
	"os"

	"leases/sqlite"
)

// The SQLite store: a file on this machine, every process that shares it
// on the same clock, which decides its leases (sqlite.Store.Lessor).
func init() {
	register(&backend{
		name:  "sqlite",
		arg:   "PATH",
		help:  "a SQLite file on this machine, timed by this machine's clock",
		clock: "this machine's clock",
		note:  "this machine's clock, which decides the SQLite file's leases",
		open:  openSQLite,
	})
}

func openSQLite(ctx context.Context, path string, o openOptions) (*store, error) {
	if !o.create {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return nil, usagef("no SQLite file at %s (only acquire and run create one)", path)
		}
	}
	s, err := sqlite.Options{BusyTimeout: o.timeout}.Open(ctx, path)
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, fs.ErrPermission):
		// A path this process cannot use (no such directory, not
		// writable) is the operator's to change: trying again does
		// nothing else, and nothing was done.
		return nil, &usageError{msg: err.Error()}
	case err != nil:
		return nil, err
	}
	return &store{raw: s.Lessor(), close: s.Close}, nil
}
