package fence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"leases"
	"leases/fence"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// A worker stores invoices in its own database, each transaction through
// its tenure. Worker A held the lease at epoch 1 and paused; worker B got
// epoch 2 and began its tenure. A's late transaction is refused, before
// it runs: its invoice never exists.
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

	fences, err := fence.New(db, fence.Options{Dialect: fence.SQLite})
	if err == nil {
		err = fences.Create(ctx) // once, at setup
	}
	if err != nil {
		panic(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE invoices (id INTEGER PRIMARY KEY, customer TEXT, amount INTEGER)`); err != nil {
		panic(err)
	}
	// The leases, as a lessor granted them (the fence looks at the
	// resource and the epoch).
	a := leases.Lease{Resource: "invoices", Holder: "A", Epoch: 1}
	b := leases.Lease{Resource: "invoices", Holder: "B", Epoch: 2}
	issue := func(tenure *fence.Tenure, id int, amount int) error {
		return tenure.Tx(ctx, nil, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO invoices VALUES (?, 'ACME', ?)`, id, amount)
			return err
		})
	}

	tenureA, err := fences.Tenure(ctx, a)
	if err != nil {
		panic(err)
	}
	tenureB, err := fences.Tenure(ctx, b) // B was granted epoch 2, and begins
	if err != nil {
		panic(err)
	}
	fmt.Println("B:", issue(tenureB, 17, 100))
	errA := issue(tenureA, 17, 90) // A wakes up, still thinking it holds the lease
	fmt.Println("A refused:", errors.Is(errA, leases.ErrStale), leases.IsRefusal(errA))
	fmt.Println(errA)

	var amount int
	if err := db.QueryRowContext(ctx, `SELECT amount FROM invoices WHERE id = 17`).Scan(&amount); err != nil {
		panic(err)
	}
	fmt.Println("invoice 17:", amount)
	// Output:
	// B: <nil>
	// A refused: true true
	// fence: transaction of epoch 1 on "invoices": stale: superseded by epoch 2 (this tenure's epoch is 1)
	// invoice 17: 100
}
