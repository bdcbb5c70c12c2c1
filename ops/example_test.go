package ops_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"

	"leases/fence"
	"leases/ops"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// A tool server issues invoices for agents. Agent A, at epoch 1, sends
// one, times out and sends it again: the retry gets the stored answer,
// and there is one invoice. Agent B is granted epoch 2 and sends its
// own; A's late call is refused as stale.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "ops-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", filepath.Join(dir, "app.db")+
		"?_txlock=immediate&_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	if err != nil {
		panic(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)

	table, err := ops.New(db, ops.Options{Dialect: fence.SQLite})
	if err == nil {
		err = table.Create(ctx) // once, at setup
	}
	if err != nil {
		panic(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE invoices (customer TEXT, amount INTEGER)`); err != nil {
		panic(err)
	}
	issue := func(epoch int64, key, customer string) {
		call := ops.Call{Resource: "invoices", Epoch: epoch, Key: key, Request: []byte(customer)}
		result, err := table.Do(ctx, call, func(ctx context.Context, tx *sql.Tx) (ops.Response, error) {
			if _, err := tx.ExecContext(ctx, `INSERT INTO invoices VALUES (?, 100)`, customer); err != nil {
				return ops.Response{}, err
			}
			return ops.Response{Status: 201, Type: "text/plain", Body: []byte("invoiced " + customer)}, nil
		})
		if err != nil {
			panic(err)
		}
		fmt.Printf("epoch %d, key %s: %s %q (newest %d)\n", epoch, key, result.Outcome, result.Response.Body, result.Newest)
	}
	issue(1, "a-1", "ACME")
	issue(1, "a-1", "ACME") // the retry
	issue(1, "a-1", "Initech")
	issue(2, "b-1", "Globex")
	issue(1, "a-2", "Umbrella") // A, late

	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM invoices`).Scan(&n); err != nil {
		panic(err)
	}
	fmt.Println("invoices:", n)
	// Output:
	// epoch 1, key a-1: accepted "invoiced ACME" (newest 0)
	// epoch 1, key a-1: replay "invoiced ACME" (newest 0)
	// epoch 1, key a-1: conflict "" (newest 0)
	// epoch 2, key b-1: accepted "invoiced Globex" (newest 0)
	// epoch 1, key a-2: stale "" (newest 2)
	// invoices: 2
}
