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
package pgtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
)

// BinDir holds initdb and postgres: Debian's PostgreSQL 15.
var BinDir = "/usr/lib/postgresql/15/bin"

// ErrNotInstalled reports that BinDir lacks initdb or postgres.
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
// postgres.
func Installed() error {
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
	owner, err := serverUser()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, exited: make(chan struct{})}
	if err := s.start(ctx, owner, append(slices.Clone(Settings), settings...)); err != nil {
		return nil, errors.Join(fmt.Errorf("start postgresql in %s: %w", dir, err), s.Close())
	}
	s.Started = time.Since(began)
	return s, nil
}

func (s *Server) start(ctx context.Context, owner *syscall.Credential, settings []string) error {
	if owner != nil {
		if err := os.Chown(s.dir, int(owner.Uid), int(owner.Gid)); err != nil {
			return err
		}
		if err := checkReachable(s.dir, owner); err != nil {
			return err
		}
	}
	data := filepath.Join(s.dir, "data")
	initdb := s.command(ctx, owner, "initdb", "-D", data, "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--locale=C", "--no-instructions",
		"--no-sync") // the cluster is thrown away: no need to flush it
	began := time.Now()
	if out, err := initdb.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %w: %s", err, bytes.TrimSpace(out))
	}
	s.Initialized = time.Since(began)
	notify, err := listenNotify()
	if err != nil {
		return err
	}
	defer notify.Close()
	logFile, err := os.Create(filepath.Join(s.dir, "postgres.log"))
	if err != nil {
		return err
	}
	defer logFile.Close() // the child has its own descriptor
	args := []string{"-D", data, "-k", s.dir}
	for _, setting := range settings {
		args = append(args, "-c", setting)
	}
	// Not exec.CommandContext: ctx bounds the start, not the server's life.
	s.cmd = s.command(context.Background(), owner, "postgres", args...)
	s.cmd.Env = append(s.cmd.Env, "NOTIFY_SOCKET="+notify.LocalAddr().String())
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	if err := s.cmd.Start(); err != nil {
		close(s.exited)
		return err
	}
	go func() {
		s.waitErr = s.cmd.Wait()
		close(s.exited)
	}()
	ready := make(chan error, 1)
	go func() { ready <- awaitReady(notify) }()
	select {
	case err := <-ready:
		return err
	case <-s.exited:
		return fmt.Errorf("postgres exited before it was ready (%v): %s", s.waitErr, s.Log())
	case <-ctx.Done():
		return fmt.Errorf("waiting for postgres to be ready: %w", ctx.Err())
	}
}

// command runs BinDir's tool as owner (nil: as this process's user), and
// kills it when this process dies.
func (s *Server) command(ctx context.Context, owner *syscall.Credential, tool string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(BinDir, tool), args...)
	cmd.Dir = s.dir
	cmd.Env = serverEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: owner, Pdeathsig: syscall.SIGKILL}
	return cmd
}

// serverEnv is this process's environment without what would steer the
// server elsewhere: libpq's PG* variables and a NOTIFY_SOCKET of its own.
func serverEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") && !strings.HasPrefix(kv, "NOTIFY_SOCKET=") {
			env = append(env, kv)
		}
	}
	return append(env, "LC_ALL=C")
}

// listenNotify opens a datagram socket in the abstract namespace, which
// any user may send to: the server, run as another user, reports there.
func listenNotify() (*net.UnixConn, error) {
	name := make([]byte, 8)
	if _, err := rand.Read(name); err != nil {
		return nil, err
	}
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: "@pgtest-" + hex.EncodeToString(name), Net: "unixgram"})
	if err != nil {
		return nil, fmt.Errorf("notify socket: %w", err)
	}
	return conn, nil
}

// awaitReady reads the server's notifications until READY=1.
func awaitReady(notify *net.UnixConn) error {
	buf := make([]byte, 4096)
	for {
		n, err := notify.Read(buf)
		if err != nil {
			return fmt.Errorf("notify socket: %w", err)
		}
		for line := range strings.SplitSeq(string(buf[:n]), "\n") {
			if line == "READY=1" {
				return nil
			}
		}
	}
}

// serverUser returns the credential to run the server with: nil unless
// this process is root, and then the postgres user's.
func serverUser() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("postgresql refuses to run as root, and there is no postgres user to run it as: %w", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, err
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// checkReachable refuses a directory whose parents owner cannot search:
// a TMPDIR of mode 0700 (as go test's own temporary directories are)
// would let initdb fail with a message far from the cause.
func checkReachable(dir string, owner *syscall.Credential) error {
	for parent := filepath.Dir(dir); ; parent = filepath.Dir(parent) {
		info, err := os.Stat(parent)
		if err != nil {
			return err
		}
		st := info.Sys().(*syscall.Stat_t)
		perm := info.Mode().Perm()
		searchable := perm&0o001 != 0 ||
			st.Gid == owner.Gid && perm&0o010 != 0 ||
			st.Uid == owner.Uid && perm&0o100 != 0
		if !searchable {
			return fmt.Errorf("user %d cannot reach %s: %s is mode %v; set TMPDIR to a directory it can reach", owner.Uid, dir, parent, perm)
		}
		if parent == filepath.Dir(parent) {
			return nil
		}
	}
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
