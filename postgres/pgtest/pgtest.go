// Package pgtest starts a PostgreSQL server of a test's own, from the
// binaries of Debian's postgresql package: a fresh cluster in a
// temporary directory, reachable only through a unix socket in that
// directory, stopped and removed when the test is done.
//
// Readiness is a handshake, not a poll: the server is started with
// NOTIFY_SOCKET pointing at a socket of this package, and Debian's
// postgres (built --with-systemd) sends READY=1 there once it accepts
// connections. The server is this process's child and gets SIGKILL when
// the process dies (Pdeathsig), so it never outlives a killed test; pg_ctl
// would have detached it. Stopping sends SIGINT, PostgreSQL's fast
// shutdown (what pg_ctl stop -m fast sends), and waits for the exit.
//
// PostgreSQL refuses to run as root. Run as root, as CI does, the server
// runs as the postgres user that Debian's package creates.
//
// All of this is Linux's (the readiness notice arrives on an abstract unix
// socket; the parent-death signal): elsewhere Installed reports
// ErrNotInstalled, and the tests that need a server skip.
package pgtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
)

// BinDir holds initdb and postgres: Debian's PostgreSQL 15.
var BinDir = "/usr/lib/postgresql/15/bin"

// ErrNotInstalled reports that BinDir lacks initdb or postgres, or that
// this system cannot run them as this package does (see Installed).
var ErrNotInstalled = errors.New("postgresql not installed")

// Server is a running PostgreSQL server of this process's own.
type Server struct {
	dir     string // the cluster (data/), the socket and the log
	cmd     *exec.Cmd
	exited  chan struct{} // closed once cmd has been waited for
	waitErr error         // cmd's exit, once exited is closed
	// Initialized is how long initdb took, Started how long Start took
	// in all: initdb, then the server's start until it was ready.
	Initialized, Started time.Duration
}

// Settings are the server's settings beyond initdb's defaults.
var Settings = []string{
	// Nothing but the unix socket: no port on any interface.
	"listen_addresses=",
	// The tests show what concurrent transactions see and lock, never
	// what survives a crash of the machine, and nothing here crashes the
	// server: a commit's visibility and its locks are the same either
	// way. Flushing only slows the tests (measured: module
	// leases/postgres's tests took 4.7 s without it, 5.4 to 6.9 s with).
	"fsync=off",
}

// Installed reports, with ErrNotInstalled, when BinDir lacks initdb or
// postgres, or when this is not Linux: the server is started as Debian's
// package builds it (with systemd's readiness notice, sent to an abstract
// unix socket, which only Linux has) and tied to this process with the
// parent-death signal, which only Linux has either.
func Installed() error {
	if err := runsHere(); err != nil {
		return err
	}
	for _, tool := range []string{"initdb", "postgres"} {
		if _, err := os.Stat(filepath.Join(BinDir, tool)); err != nil {
			return fmt.Errorf("%w: %v", ErrNotInstalled, err)
		}
	}
	return nil
}

// Start initializes a cluster in a new temporary directory and starts a
// server on it with Settings and then settings ("name=value", the later
// one wins), waiting until it accepts connections or ctx ends. The caller
// must Close it.
func Start(ctx context.Context, settings ...string) (*Server, error) {
	began := time.Now()
	if err := Installed(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, exited: make(chan struct{})}
	if err := s.start(ctx, append(slices.Clone(Settings), settings...)); err != nil {
		return nil, errors.Join(fmt.Errorf("start postgresql in %s: %w", dir, err), s.Close())
	}
	s.Started = time.Since(began)
	return s, nil
}

// DSN returns the connection string for database name as the postgres
// superuser, over the unix socket.
func (s *Server) DSN(name string) string {
	return fmt.Sprintf("host=%s port=5432 user=postgres dbname=%s sslmode=disable", s.dir, name)
}

// Open opens a database/sql handle on the postgres database through
// pgx's driver; nothing connects until the handle is used.
func (s *Server) Open() (*sql.DB, error) {
	return sql.Open("pgx", s.DSN("postgres"))
}

// Log returns what the server wrote to its log so far.
func (s *Server) Log() string {
	out, err := os.ReadFile(filepath.Join(s.dir, "postgres.log"))
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	return string(out)
}

// Close stops the server with a fast shutdown (open transactions are
// rolled back, clients disconnected), waits for it to exit and removes
// its directory.
func (s *Server) Close() error {
	var stopErr error
	if s.cmd != nil && s.cmd.Process != nil {
		select {
		case <-s.exited:
		default:
			if err := s.cmd.Process.Signal(syscall.SIGINT); err != nil {
				stopErr = fmt.Errorf("stop postgres: %w", err)
			}
		}
		<-s.exited
		var exit *exec.ExitError
		if s.waitErr != nil && !errors.As(s.waitErr, &exit) {
			stopErr = errors.Join(stopErr, s.waitErr)
		} else if exit != nil {
			stopErr = errors.Join(stopErr, fmt.Errorf("postgres exited with %v: %s", s.waitErr, lastLines(s.Log(), 5)))
		}
	}
	return errors.Join(stopErr, os.RemoveAll(s.dir))
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// Pid returns the server's process id.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// Dir returns the directory that holds the cluster, the socket and the
// log; Close removes it.
func (s *Server) Dir() string { return s.dir }
