package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"leases"
	"leases/internal/roles"
	"leases/sqlite"
	"leases/testkit/childtest"
	"leases/testkit/sqlitetest"
	"leases/testkit/testctx"
)

// measureEnv runs the measurements of docs/sqlite.md ("What one file
// costs"): LEASES_MEASURE_SQLITE=1 go test -run Measure -v ./sqlite.
const measureEnv = "LEASES_MEASURE_SQLITE"

// businessRole is this binary re-executed as a worker of the leases
// file's own tables: it begins a transaction (Store.Tx), writes, says
// "in" and holds the transaction until its input ends, then commits.
var businessRole = roles.Register("sqlite-test-business", func(args []string) int {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer s.Close()
	err = s.Tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO work (x) VALUES (1)`); err != nil {
			return err
		}
		fmt.Println("in")
		_, err := io.Copy(io.Discard, os.Stdin)
		return err
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
})

// A process stopped (SIGSTOP) inside a transaction on the leases file
// holds its write lock, and so every lease operation of every other
// process, for the whole stop: an acquire waits for the stop, or fails
// with SQLITE_BUSY once the busy timeout has passed first.
func TestMeasureStoppedInsideATransaction(t *testing.T) {
	businessRole.MaySkip() // a measurement the run may leave out
	if os.Getenv(measureEnv) == "" {
		t.Skip("a measurement: set " + measureEnv + "=1")
	}
	for _, c := range []struct{ stop, busy time.Duration }{
		{time.Second, sqlite.DefaultBusyTimeout}, {3 * time.Second, sqlite.DefaultBusyTimeout}, {3 * time.Second, time.Second},
	} {
		t.Run(fmt.Sprintf("stopped %v, busy timeout %v", c.stop, c.busy), func(t *testing.T) {
			ctx := testctx.Context(t)
			path := sqlitetest.Path(t)
			if err := sqlitetest.Open(t, path).Tx(ctx, func(tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, `CREATE TABLE work (x INTEGER)`)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			other, err := sqlite.Options{BusyTimeout: c.busy}.Open(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = other.Close() })
			child := childtest.Start(t, businessRole, path)
			if !child.Lines.Scan() || child.Lines.Text() != "in" {
				t.Fatal("the worker did not begin its transaction")
			}
			if err := syscall.Kill(child.Pid(), syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			stopped := time.Now()
			done := make(chan error, 1)
			go func() {
				_, err := other.Lessor().Acquire(ctx, "r", "A", time.Minute)
				done <- err
			}()
			var err2 error
			select {
			case err2 = <-done:
			case <-time.After(c.stop):
				if err := syscall.Kill(child.Pid(), syscall.SIGCONT); err != nil {
					t.Fatal(err)
				}
				_ = child.In.Close()
				err2 = <-done
			}
			t.Logf("acquire after %v: %v", time.Since(stopped).Round(time.Millisecond), err2)
			_ = syscall.Kill(child.Pid(), syscall.SIGCONT)
			_ = child.In.Close()
			_ = child.Wait()
		})
	}
}

// How long each lease operation of the Lessor holds the file's write
// lock: each is one BEGIN IMMEDIATE transaction, timed from its call to
// its answer with no other process on the file (so with no wait for the
// lock), an upper bound of the time it holds the lock.
func TestMeasureWriteLockHeld(t *testing.T) {
	if os.Getenv(measureEnv) == "" {
		t.Skip("a measurement: set " + measureEnv + "=1")
	}
	ctx := testctx.Context(t)
	l := sqlitetest.Open(t, sqlitetest.Path(t)).Lessor()
	times := map[string][]time.Duration{}
	timed := func(op string, f func() error) {
		began := time.Now()
		if err := f(); err != nil && !leases.IsRefusal(err) {
			t.Fatal(op, err)
		}
		times[op] = append(times[op], time.Since(began))
	}
	for range 500 {
		var held leases.Lease
		timed("acquire (grant)", func() (err error) { held, err = l.Acquire(ctx, "r", "A", time.Minute); return err })
		timed("acquire refused, place written", func() error { _, err := l.Acquire(ctx, "r", "B", time.Minute); return err })
		timed("acquire refused, a look only", func() error { _, err := l.Acquire(ctx, "r", "B", time.Minute); return err })
		timed("renew", func() (err error) { held, err = l.Renew(ctx, held, time.Minute); return err })
		timed("release", func() error { return l.Release(ctx, held) })
		timed("acquire (grant to the first in line)", func() (err error) { held, err = l.Acquire(ctx, "r", "B", time.Minute); return err })
		timed("release", func() error { return l.Release(ctx, held) })
	}
	for op, d := range times {
		slices.Sort(d)
		t.Logf("%-40s n=%d p50 %v p99 %v max %v", op, len(d), d[len(d)/2].Round(10*time.Microsecond),
			d[len(d)*99/100].Round(10*time.Microsecond), d[len(d)-1].Round(10*time.Microsecond))
	}
}
