package pgtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// runsHere says that this package can start a server here: Linux.
func runsHere() error { return nil }

// start initializes the cluster in s.dir and starts the server on it,
// with settings, as the postgres user when this process is root.
func (s *Server) start(ctx context.Context, settings []string) error {
	owner, err := serverUser()
	if err != nil {
		return err
	}
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
