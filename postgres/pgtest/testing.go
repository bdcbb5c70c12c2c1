package pgtest

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"

	"leases/testkit/testctx"
)

// New starts a server for t alone, with settings as for Start, and stops
// it when t ends. It skips t, with one line, where PostgreSQL is not
// installed.
func New(t testing.TB, settings ...string) *Server {
	t.Helper()
	s, err := Start(testctx.Context(t), settings...)
	if errors.Is(err, ErrNotInstalled) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// shared is the server of the test binary, started by the first test
// that asks for it and stopped by Main.
var shared struct {
	once   sync.Once
	server *Server
	err    error
}

// Shared returns the test binary's server, starting it for the first
// test that asks; the binary's TestMain must call Main, which stops it.
// It skips t, with one line, where PostgreSQL is not installed. One
// server for all the tests of a package: a cluster takes seconds to
// initialize, and each test keeps to tables of its own.
func Shared(t testing.TB) *Server {
	t.Helper()
	shared.once.Do(func() { shared.server, shared.err = Start(testctx.Context(t)) })
	if errors.Is(shared.err, ErrNotInstalled) {
		t.Skip(shared.err)
	}
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.server
}

// Main runs the tests and stops the shared server, if one was started:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
func Main(m *testing.M) int {
	code := m.Run()
	if shared.server != nil {
		if err := shared.server.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest:", err)
			code = max(code, 1)
		}
	}
	return code
}

// Open opens a handle on server's postgres database for t, closed when
// t ends, with at most conns connections (0: no limit).
func Open(t testing.TB, server *Server, conns int) *sql.DB {
	t.Helper()
	db, err := server.Open()
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(conns)
	t.Cleanup(func() { _ = db.Close() })
	return db
}
