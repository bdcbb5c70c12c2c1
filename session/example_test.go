package session_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"leases"
	"leases/clock"
	"leases/fence"
	"leases/session"
	"leases/sqlite"
)

// work does one job under its lease, the way a service should: it waits
// for the job's lease, begins its tenure with the guard of the service's
// own database (so that no transaction of an older holder commits from
// then on), and writes the job's rows in transactions that the guard
// admits only while this holder's epoch is the newest (and, with a
// store's guard, only while its lease is live), under a context that ends
// when the lease may be lost. Every error is returned: none is dropped.
//
// Its imports:
//
//	import (
//		"context"
//		"database/sql"
//		"time"
//
//		"leases"
//		"leases/fence"
//		"leases/session"
//	)
func work(ctx context.Context, lessor leases.Lessor, guard fence.Guard, job, worker string) error {
	return session.Do(ctx, lessor, job, worker, session.Options{TTL: 10 * time.Second},
		func(ctx context.Context, s *session.Session) error {
			tenure, err := guard.Tenure(ctx, s.Lease())
			if err != nil {
				return err // superseded already, or the database failed
			}
			for _, line := range []string{"hours", "travel"} {
				// ... the work for this line, under ctx ...
				err := tenure.Tx(ctx, nil, func(tx *sql.Tx) error {
					_, err := tx.ExecContext(ctx, `INSERT INTO invoice_lines (job, line, epoch) VALUES (?, ?, ?)`,
						job, line, s.Epoch())
					return err
				})
				if err != nil {
					return err // leases.ErrStale, the session's end, or a failure: see docs/service.md
				}
			}
			return nil
		})
}

// open opens what work needs: the lessor (here a SQLite file that every
// worker on this machine shares, leases timed by the machine's clock) and
// the service's own database with the fence table in it.
//
// Its imports:
//
//	import (
//		"context"
//		"database/sql"
//		"errors"
//		"path/filepath"
//
//		"leases"
//		"leases/fence"
//		"leases/sqlite"
//	)
func open(ctx context.Context, dir string) (leases.Lessor, *sql.DB, *fence.Table, func(), error) {
	store, err := sqlite.Open(ctx, filepath.Join(dir, "leases.db")) // or etcd.New(client, etcd.Options{})
	if err != nil {
		return nil, nil, nil, nil, err
	}
	lessor := store.Lessor() // the authority's clock decides, never a caller's
	// The service's database: write lock at BEGIN, an explicit busy
	// timeout, one connection.
	db, err := sql.Open("sqlite", filepath.Join(dir, "app.db")+"?_txlock=immediate&_pragma=busy_timeout(10000)")
	if err != nil {
		return nil, nil, nil, nil, errors.Join(err, store.Close())
	}
	db.SetMaxOpenConns(1)
	fences, err := fence.New(db, fence.Options{Dialect: fence.SQLite})
	if err == nil {
		err = fences.Create(ctx) // once, at setup
	}
	if err != nil {
		return nil, nil, nil, nil, errors.Join(err, db.Close(), store.Close())
	}
	return lessor, db, fences, func() { _ = db.Close(); _ = store.Close() }, nil
}

// A worker does a job under its lease: both lines are written at the
// lease's epoch. The same job done again by another worker gets a newer
// epoch; a paused first worker that woke up now would be superseded.
func Example_worker() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "leases-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	lessor, db, fences, closeAll, err := open(ctx, dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer closeAll()
	if _, err := db.ExecContext(ctx, `CREATE TABLE invoice_lines (job TEXT, line TEXT, epoch INTEGER)`); err != nil {
		fmt.Println(err)
		return
	}
	for _, worker := range []string{"worker-1", "worker-2"} {
		if err := work(ctx, lessor, fences, "invoice-7", worker); err != nil {
			fmt.Println(err)
			return
		}
	}
	rows, err := db.QueryContext(ctx, `SELECT line, epoch FROM invoice_lines ORDER BY rowid`)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var line string
		var epoch int64
		_ = rows.Scan(&line, &epoch)
		fmt.Println(line, "at epoch", epoch)
	}
	// Output:
	// hours at epoch 1
	// travel at epoch 1
	// hours at epoch 2
	// travel at epoch 2
}

// A holder whose process paused past its session's deadline learns it
// from Check (or from its context) before it acts. The clock is a manual
// one, so that the output is the same every time.
func ExampleSession_Check() {
	ctx := context.Background()
	clk := clock.NewManual(0)
	lessor, closeStore, err := memoryLessor(ctx, clk)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer closeStore()
	s, err := session.Start(ctx, lessor, "invoice-7", "worker-1",
		session.Options{TTL: 10 * time.Second, Margin: 2 * time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close(ctx)
	fmt.Println("holds epoch", s.Epoch(), "for", s.Deadline().Sub(time.UnixMilli(clk.Now())))
	_ = clk.Advance(9_000) // 9 s in one step: the process was stopped
	fmt.Println(s.Check())
	<-s.Context().Done()
	fmt.Println(context.Cause(s.Context()) == s.Err())
	// Output:
	// holds epoch 1 for 7.99s
	// session ended: its deadline passed 1.01s ago, 2.01s before the lease on "invoice-7" could expire
	// true
}

// A leader loop: the holder leads while it holds the lease, and tries to
// lead again after losing it, until its context ends.
func ExampleLead() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	store, err := sqlite.Open(ctx, ":memory:")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()
	err = session.Lead(ctx, clock.Lessor(store.Authority(), clock.Wall{}), "scheduler", "node-1",
		session.Options{TTL: 10 * time.Second},
		session.Leader{
			OnStarted: func(ctx context.Context, s *session.Session) {
				fmt.Println("leading at epoch", s.Epoch())
				stop() // this example leads once; a service runs until it is told to stop
			},
			OnStopped: func(err error) { fmt.Println("stopped:", err) },
		})
	fmt.Println(err)
	// Output:
	// leading at epoch 1
	// stopped: context canceled
	// session: leading "scheduler": context canceled
}

// doubt is what a caller does with an error of Start, Wait, Do or Lead
// that may leave a lease held: an unknown outcome is not "nothing
// happened". It says whether the worker may still hold the job's lease,
// and until when.
//
// Its imports:
//
//	import (
//		"errors"
//		"fmt"
//
//		"leases/session"
//	)
func doubt(err error, job, worker string) error {
	var unknown *session.OutcomeError
	switch {
	case !errors.As(err, &unknown):
		return err // nothing is held: retry when it suits
	case unknown.Released:
		return fmt.Errorf("%s holds nothing on %s (released after an unknown outcome): %w", worker, job, err)
	}
	// Do not act on it: it may be live until then, and the next holder
	// waits until then.
	return fmt.Errorf("%s may hold %s at epoch %d until tick %d: %w", worker, job,
		unknown.Lease.Epoch, unknown.Lease.ExpiresAt, err)
}

// lostAnswers is a lessor whose acquires take effect but whose answers
// are lost, and whose releases fail while down: a store that the network
// cuts off once the commit has gone out.
type lostAnswers struct {
	leases.Lessor
	down bool
}

func (l *lostAnswers) Acquire(ctx context.Context, resource, holder string, ttl time.Duration) (leases.Lease, error) {
	granted, err := l.Lessor.Acquire(ctx, resource, holder, ttl)
	if err != nil {
		return granted, err
	}
	return granted, fmt.Errorf("commit: connection reset: %w", leases.ErrOutcomeUnknown)
}

func (l *lostAnswers) Release(ctx context.Context, held leases.Lease) error {
	if l.down {
		return errors.New("connection refused")
	}
	return l.Lessor.Release(ctx, held)
}

// An acquire whose answer was lost: Start releases what it may have
// granted and says whether anything may still be held.
func ExampleOutcomeError() {
	ctx := context.Background()
	memory, closeStore, err := memoryLessor(ctx, clock.NewManual(0))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer closeStore()
	lessor := &lostAnswers{Lessor: memory}
	for _, down := range []bool{false, true} {
		lessor.down = down
		_, err := session.Start(ctx, lessor, "invoice-7", "worker-1", session.Options{TTL: 10 * time.Second})
		err = doubt(err, "invoice-7", "worker-1")
		fmt.Println(errors.Is(err, leases.ErrOutcomeUnknown), strings.SplitN(err.Error(), ":", 2)[0])
	}
	// Output:
	// true worker-1 holds nothing on invoice-7 (released after an unknown outcome)
	// true worker-1 may hold invoice-7 at epoch 2 until tick 10000
}

// memoryLessor is a lessor on a SQLite store in memory, on the clock
// clk, for the examples that must print the same ticks every time.
func memoryLessor(ctx context.Context, clk clock.Clock) (leases.Lessor, func(), error) {
	store, err := sqlite.Open(ctx, ":memory:")
	if err != nil {
		return nil, nil, err
	}
	return clock.Lessor(store.Authority(), clk), func() { _ = store.Close() }, nil
}

// A holder tells how its session ended from the cause of its context:
// a definite end (here the deadline, passed while the process was
// stopped) is never a failure to retry.
func ExampleEndReason() {
	ctx := context.Background()
	clk := clock.NewManual(0)
	lessor, closeStore, err := memoryLessor(ctx, clk)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer closeStore()
	s, err := session.Start(ctx, lessor, "invoice-7", "worker-1", session.Options{TTL: 10 * time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close(ctx)
	_ = clk.Advance(9_000) // the process was stopped past its deadline
	<-s.Context().Done()
	end := context.Cause(s.Context())
	fmt.Println(session.EndReason(end), errors.Is(end, session.ErrDeadline), errors.Is(end, session.ErrEnded))
	fmt.Println("retry it?", errors.Is(end, session.ErrTransient))
	// Output:
	// deadline true true
	// retry it? false
}
