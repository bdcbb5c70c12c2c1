//go:build !linux

package pgtest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
)

// Crash needs Linux (it finds the server's backends in /proc and waits
// for them through pidfds); elsewhere it fails with errors.ErrUnsupported.
func (s *Server) Crash(ctx context.Context) error {
	return fmt.Errorf("pgtest: crash on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

// Restart follows Crash, and so needs Linux too.
func (s *Server) Restart(ctx context.Context) error {
	return fmt.Errorf("pgtest: restart on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}
