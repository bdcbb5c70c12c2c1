package session_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"

	"leases"
	"leases/clock"
	"leases/fence"
	"leases/session"
	"leases/sqlite"
)

// A worker in a service: for each job it waits for the job's lease, does
// the work, and writes the result through the fence inside its own
// transaction, where the business row commits or rolls back with the fence
// row. It writes only if its session still holds the lease when the work
// is done; one job here takes so long (a pause of the whole process, say)
// that the session has ended, and the worker writes nothing. A fence holds
// one value per resource per epoch, so each job is a resource of its own.
// The clock is a manual one, so that the output is the same every time; a
// service passes clock.Wall{} and lets time pass.
func Example_worker() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "leases-example-")
	defer os.RemoveAll(dir)

	// The authority: a file shared by every worker (or etcd, with package
	// leases/etcd).
	store, err := sqlite.Open(ctx, filepath.Join(dir, "leases.db"))
	if err != nil {
		panic(err)
	}
	defer store.Close()

	// The worker's own database, where its business rows live: the fence
	// table goes there too.
	db, err := sql.Open("sqlite", filepath.Join(dir, "invoices.db")+"?_txlock=immediate&_pragma=busy_timeout(10000)")
	if err != nil {
		panic(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `CREATE TABLE invoices (job TEXT PRIMARY KEY, total TEXT, epoch INTEGER)`); err != nil {
		panic(err)
	}
	fenced, err := fence.New(fence.SQLite, fence.DefaultTable)
	if err != nil {
		panic(err)
	}
	if err := fenced.Create(ctx, db); err != nil {
		panic(err)
	}

	clk := clock.NewManual(0)
	work := map[string]int64{"invoice-1": 3, "invoice-2": 20, "invoice-3": 4} // ticks each takes
	for _, job := range []string{"invoice-1", "invoice-2", "invoice-3"} {
		s, err := session.Wait(ctx, store.Authority(), clk, job, "worker-1", session.Options{TTL: 10, Margin: 2})
		if err != nil {
			panic(err)
		}
		_ = clk.Advance(clk.Now() + work[job]) // the work

		// Check reads the clock itself: right after a pause of the whole
		// process it knows the deadline has passed. (A worker that waits
		// for work selects on s.Done() as well.)
		if err := s.Check(); err != nil {
			fmt.Println(job, "not written:", err)
			_ = s.Close(ctx)
			continue
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			panic(err)
		}
		total := fmt.Sprintf("total-of-%s", job)
		result, err := fenced.Write(ctx, tx, job, s.Epoch(), total)
		if err != nil || result.Outcome != leases.Accepted {
			_ = tx.Rollback() // superseded (stale), or done already (replay)
			fmt.Println(job, "not written:", result.Outcome, err)
			_ = s.Close(ctx)
			continue
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO invoices VALUES (?, ?, ?)`, job, total, s.Epoch()); err != nil {
			panic(err)
		}
		if err := tx.Commit(); err != nil {
			panic(err) // an unknown outcome: read the fence row before retrying
		}
		fmt.Printf("%s written at tick %d with epoch %d\n", job, clk.Now(), s.Epoch())
		_ = s.Close(ctx)
	}
	// Output:
	// invoice-1 written at tick 3 with epoch 1
	// invoice-2 not written: session ended: the clock reached tick 23; the deadline was tick 11, the lease's expiry 13 less the margin 2
	// invoice-3 written at tick 27 with epoch 1
}
