package fence_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"

	"leases"
	"leases/fence"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// A worker stores an invoice and the fence row in one transaction of its
// own database. Worker A held the lease at epoch 1 and paused; worker B
// got epoch 2 and wrote. A's late transaction is stale: A rolls it back,
// and its invoice never exists.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "fence-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	// The user's own file: write lock at BEGIN, a busy timeout, WAL.
	db, err := sql.Open("sqlite", filepath.Join(dir, "app.db")+
		"?_txlock=immediate&_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	if err != nil {
		panic(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)

	table, err := fence.New(fence.SQLite, fence.DefaultTable)
	if err != nil {
		panic(err)
	}
	if err := table.Create(ctx, db); err != nil { // once, at setup
		panic(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE invoices (id INTEGER PRIMARY KEY, customer TEXT, amount INTEGER)`); err != nil {
		panic(err)
	}

	// issue is a worker's transaction: the fence first, the invoice only
	// if the fence accepted, both committed together.
	issue := func(epoch int64, id int, customer string, amount int) (leases.Outcome, error) {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return "", err
		}
		defer tx.Rollback() // a no-op after Commit
		result, err := table.Write(ctx, tx, "invoices", epoch, fmt.Sprintf("invoice %d", id))
		if err != nil || result.Outcome != leases.Accepted {
			return result.Outcome, err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO invoices VALUES (?, ?, ?)`, id, customer, amount); err != nil {
			return "", err
		}
		return result.Outcome, tx.Commit()
	}

	fromB, errB := issue(2, 17, "ACME", 100)
	fromA, errA := issue(1, 17, "ACME", 90) // A wakes up, still thinking it holds the lease
	fmt.Println("B:", fromB, errB)
	fmt.Println("A:", fromA, errA)

	var amount int
	if err := db.QueryRowContext(ctx, `SELECT amount FROM invoices WHERE id = 17`).Scan(&amount); err != nil {
		panic(err)
	}
	fmt.Println("invoice 17:", amount)
	// Output:
	// B: accepted <nil>
	// A: stale <nil>
	// invoice 17: 100
}
