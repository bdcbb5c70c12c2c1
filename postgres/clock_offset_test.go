package postgres_test

// The server's clock, not the client's: a server started with libfaketime
// (Debian's libfaketime, preloaded into the postgres processes) whose
// clock is offset from this process's, or stepped back while it runs.

import (
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"leases"
	"leases/postgres"
	"leases/postgres/pgtest"
	"leases/session"
	"leases/testkit/fencetest"
)

// offsetServer starts a server of the test's own whose clock is offset
// from this process's by what offset says ("+7" is seven seconds ahead,
// in libfaketime's notation), and returns it with a function that changes
// the offset while the server runs. The server inherits the environment
// that tells libfaketime so (pgtest passes this process's environment
// on); every server process reads the offset from a file at each reading
// of the clock. It skips the test, in one line, where libfaketime is not
// installed.
func offsetServer(t *testing.T, offset string) (*sql.DB, func(offset string)) {
	t.Helper()
	libs, _ := filepath.Glob("/usr/lib/*/faketime/libfaketime.so.1")
	if len(libs) == 0 {
		t.Skip("libfaketime is not installed (Debian's libfaketime): no server with a clock of its own")
	}
	dir, err := os.MkdirTemp("", "faketime-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	// The server runs as another user when this process is root: let it
	// read the file.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "offset")
	set := func(offset string) {
		t.Helper()
		next := file + ".next"
		if err := os.WriteFile(next, []byte(offset+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(next, file); err != nil { // never half a file
			t.Fatal(err)
		}
	}
	set(offset)
	t.Setenv("LD_PRELOAD", libs[0])
	t.Setenv("FAKETIME_TIMESTAMP_FILE", file)
	t.Setenv("FAKETIME_NO_CACHE", "1")
	t.Setenv("DONT_FAKE_MONOTONIC", "1") // only the wall clock moves
	return pgtest.Open(t, pgtest.New(t), 0), set
}

// With the server's clock 7 s ahead of the client's, the leases' ticks
// are the server's: a grant's tick lies between two readings of the
// server's clock around it, seconds away from the client's; the guard in
// the client's transaction, which reads the server's clock too, finds the
// lease live; a session on it holds and ends on the client's own clock.
// A lessor that read the client's time would grant at ticks 7 s behind,
// and the guard would find a 2 s lease expired at once.
func TestTicksAreTheServersNotTheClients(t *testing.T) {
	ctx := fencetest.Context(t)
	db, _ := offsetServer(t, "+7")
	store := newStore(t, db, postgres.Options{})
	l := store.Lessor()
	before := serverClock(t, db)
	if client := time.Now().UnixMilli(); before-client < 6000 {
		t.Fatalf("the server's clock reads %d, the client's %d: not 7 s ahead", before, client)
	}
	a, err := l.Acquire(ctx, "r", "A", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	after := serverClock(t, db)
	if a.GrantedAt < before || a.GrantedAt > after {
		t.Fatalf("granted at tick %d, outside the server's clock's %d .. %d (the client's clock reads %d)",
			a.GrantedAt, before, after, time.Now().UnixMilli())
	}
	tenure, err := store.Tenure(ctx, a)
	if err == nil {
		err = tenure.Tx(ctx, nil, func(*sql.Tx) error { return nil })
	}
	if err != nil {
		t.Fatalf("a tenure's transaction right after the grant: %v; want it committed", err)
	}
	if err := l.Release(ctx, a); err != nil {
		t.Fatal(err)
	}
	s, err := session.Start(ctx, l, "r", "B", session.Options{TTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if left := time.Until(s.Deadline()); left <= 0 || left > 2*time.Second {
		t.Fatalf("the session's deadline is %v away on the client's clock; want within its 2 s", left)
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// A server clock stepped back while a lease is live makes no tick run
// backwards: a decision's tick is never before the row's last change, so
// the live lease stays live (for longer, by the step), another holder is
// refused as held rather than as a backwards tick, the holder renews and
// releases, and the next grant is at a tick no earlier than the last.
func TestAServerClockSteppedBackRunsNoTickBackwards(t *testing.T) {
	ctx := fencetest.Context(t)
	db, set := offsetServer(t, "+0")
	l := newStore(t, db, postgres.Options{}).Lessor()
	a, err := l.Acquire(ctx, "r", "A", 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	set("-10")
	for serverClock(t, db) >= a.GrantedAt { // until the server reads the step
	}
	if live, ok, err := l.Lease(ctx, "r"); err != nil || !ok || live != a {
		t.Fatalf("holder after the step back: %+v, %v, %v; want A's lease", live, ok, err)
	}
	var held *leases.HeldError
	if _, err := l.Acquire(ctx, "r", "B", time.Second); !errors.As(err, &held) || held.At < a.GrantedAt {
		t.Fatalf("B's acquire after the step back: %v; want held, decided at a tick no earlier than %d", err, a.GrantedAt)
	}
	renewed, err := l.Renew(ctx, a, 3*time.Second)
	if err != nil || renewed.ExpiresAt < a.ExpiresAt {
		t.Fatalf("A's renewal after the step back: %+v, %v; want no earlier an expiry than %d", renewed, err, a.ExpiresAt)
	}
	if err := l.Release(ctx, renewed); err != nil {
		t.Fatalf("A's release after the step back: %v", err)
	}
	b, err := l.Acquire(ctx, "r", "B", time.Second)
	if err != nil || b.Epoch != 2 || b.GrantedAt < a.GrantedAt {
		t.Fatalf("B's acquire after the release: %+v, %v; want epoch 2 at a tick no earlier than %d", b, err, a.GrantedAt)
	}
}
