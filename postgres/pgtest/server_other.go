//go:build !linux

package pgtest

import (
	"context"
	"fmt"
	"runtime"
)

// runsHere fails with ErrNotInstalled: this package starts Debian's
// PostgreSQL, waits for its systemd readiness notice on an abstract unix
// socket and ties it to this process with the parent-death signal, all of
// which are Linux's.
func runsHere() error {
	return fmt.Errorf("%w: pgtest starts PostgreSQL on Linux only, not on %s", ErrNotInstalled, runtime.GOOS)
}

// start fails: see runsHere.
func (s *Server) start(context.Context, []string) error { return runsHere() }
