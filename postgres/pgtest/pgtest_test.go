package pgtest_test

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"leases/postgres/pgtest"
)

// A server starts, answers on its unix socket only, and is gone, process
// and directory, after Close.
func TestServerStartsAndStops(t *testing.T) {
	s, err := pgtest.Start(t.Context())
	if err != nil {
		if errors.Is(err, pgtest.ErrNotInstalled) {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	t.Logf("started in %v: initdb %v, then ready in %v", s.Started, s.Initialized, s.Started-s.Initialized)
	db := pgtest.Open(t, s, 1)
	var listen, version string
	if err := db.QueryRowContext(t.Context(), "SHOW listen_addresses").Scan(&listen); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRowContext(t.Context(), "SHOW server_version").Scan(&version); err != nil {
		t.Fatal(err)
	}
	t.Logf("server_version %s", version)
	if listen != "" {
		t.Errorf("listen_addresses = %q, want none: the server must listen on its unix socket only", listen)
	}
	pid, dir := s.Pid(), s.Dir()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := signalZero(pid); !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("postgres (pid %d) still there after Close: signal 0 says %v", pid, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "data")); !os.IsNotExist(err) {
		t.Errorf("%s still there after Close: %v", dir, err)
	}
}

// signalZero sends pid the null signal, which only checks that the
// process is there: os.ErrProcessDone says it is not.
func signalZero(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Signal(syscall.Signal(0))
}
