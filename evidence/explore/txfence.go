package explore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"leases"
	"leases/evidence/backend"
	"leases/fence"
	"leases/internal/guard"
)

// txFence is the fenced receiver as a user's own transactions see it: the
// fence table of package fence, in a SQLite database of its own (the
// user's, apart from the backend's store), each write and observe in a
// transaction of the user's that the fence does not commit.
type txFence struct {
	db    *sql.DB
	table *fence.Table
	// shared is set when db is the backend store's, which closes it.
	shared bool
	// The snapshot's and restore's statements, compiled once in fenceOn
	// (before any transaction holds the one connection): compiling them
	// at every state was a tenth of the SQLite exploration's time.
	selectRows, deleteRows, insertRow *sql.Stmt
}

const (
	fenceSelectRows = "SELECT resource, epoch, value_epoch, value FROM " + fence.DefaultTable + " ORDER BY resource"
	fenceDeleteRows = "DELETE FROM " + fence.DefaultTable
	fenceInsertRow  = "INSERT INTO " + fence.DefaultTable + " (resource, epoch, value_epoch, value) VALUES (?, ?, ?, ?)"
)

var _ leases.Receiver = (*txFence)(nil)

func openTxFence(ctx context.Context) (*txFence, error) {
	// An in-memory database is its one connection: keep exactly one.
	db, err := sql.Open("sqlite", ":memory:?_txlock=immediate")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	f, err := fenceOn(ctx, db)
	if err != nil {
		return nil, errors.Join(err, db.Close())
	}
	return f, nil
}

// fenceOn creates the fence table in db, which compiles its statements.
func fenceOn(ctx context.Context, db *sql.DB) (*txFence, error) {
	table, err := fence.New(db, fence.Options{Dialect: fence.SQLite})
	if err == nil {
		err = table.Create(ctx)
	}
	if err != nil {
		return nil, err
	}
	f := &txFence{db: db, table: table}
	for _, st := range []struct {
		to    **sql.Stmt
		query string
	}{{&f.selectRows, fenceSelectRows}, {&f.deleteRows, fenceDeleteRows}, {&f.insertRow, fenceInsertRow}} {
		if *st.to, err = db.PrepareContext(ctx, st.query); err != nil {
			return nil, errors.Join(err, f.closeStmts(), table.Close())
		}
	}
	return f, nil
}

// closeStmts closes the statements fenceOn compiled.
func (f *txFence) closeStmts() error {
	var errs []error
	for _, st := range []*sql.Stmt{f.selectRows, f.deleteRows, f.insertRow} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	return errors.Join(errs...)
}

func (f *txFence) Mode() leases.Mode { return leases.Fenced }

func (f *txFence) Write(ctx context.Context, resource string, epoch int64, value string) (leases.WriteResult, error) {
	return inTx(ctx, f.db, func(tx *sql.Tx) (leases.WriteResult, error) { return f.table.Write(ctx, tx, resource, epoch, value) })
}

func (f *txFence) Fence(ctx context.Context, resource string, epoch int64) (leases.WriteResult, error) {
	return inTx(ctx, f.db, func(tx *sql.Tx) (leases.WriteResult, error) { return guard.Observe(f.table, ctx, tx, resource, epoch) })
}

func (f *txFence) Read(ctx context.Context, resource string) (leases.Record, bool, error) {
	var found bool
	result, err := inTx(ctx, f.db, func(tx *sql.Tx) (leases.WriteResult, error) {
		record, ok, err := f.table.Read(ctx, tx, resource)
		found = ok
		return leases.WriteResult{Record: record}, err
	})
	return result.Record, found, err
}

// inTx runs do in a transaction of the user's and commits it, as a user's
// code does around the fence.
func inTx(ctx context.Context, db *sql.DB, do func(*sql.Tx) (leases.WriteResult, error)) (leases.WriteResult, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return leases.WriteResult{}, err
	}
	result, err := do(tx)
	if err != nil {
		return leases.WriteResult{}, errors.Join(err, tx.Rollback())
	}
	return result, tx.Commit()
}

// snapshot is every row of the fence table, in key order.
func (f *txFence) snapshot(ctx context.Context) ([]byte, error) {
	rows, err := f.selectRows.QueryContext(ctx)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var all [][4]any
	for rows.Next() {
		var row [4]any
		if err := rows.Scan(&row[0], &row[1], &row[2], &row[3]); err != nil {
			return nil, err
		}
		all = append(all, row)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return json.Marshal(all)
}

// restore makes the fence table hold exactly a snapshot's rows.
func (f *txFence) restore(ctx context.Context, snapshot []byte) error {
	var all [][4]any
	if err := json.Unmarshal(snapshot, &all); err != nil {
		return fmt.Errorf("restore the fence table: %w", err)
	}
	_, err := inTx(ctx, f.db, func(tx *sql.Tx) (leases.WriteResult, error) {
		if _, err := tx.StmtContext(ctx, f.deleteRows).ExecContext(ctx); err != nil {
			return leases.WriteResult{}, err
		}
		for _, row := range all {
			// JSON numbers come back as float64; epochs are small integers.
			args := []any{row[0], int64(row[1].(float64)), row[2], row[3]}
			if ve, ok := row[2].(float64); ok {
				args[2] = int64(ve)
			}
			if _, err := tx.StmtContext(ctx, f.insertRow).ExecContext(ctx, args...); err != nil {
				return leases.WriteResult{}, err
			}
		}
		return leases.WriteResult{}, nil
	})
	return err
}

func (f *txFence) close() error {
	if f.shared {
		return errors.Join(f.closeStmts(), f.table.Close())
	}
	return errors.Join(f.closeStmts(), f.table.Close(), f.db.Close())
}

// withFence is a backend's explorable store together with a user's fence
// database: one state, snapshot and restored as one.
type withFence struct {
	backend.Rewindable
	fence *txFence
}

func (w withFence) Snapshot(ctx context.Context) ([]byte, error) {
	store, err := w.Rewindable.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := w.fence.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	return json.Marshal([2]json.RawMessage{store, rows})
}

func (w withFence) Restore(ctx context.Context, snapshot []byte) error {
	var both [2]json.RawMessage
	if err := json.Unmarshal(snapshot, &both); err != nil {
		return fmt.Errorf("restore: not a snapshot: %w", err)
	}
	return errors.Join(w.Rewindable.Restore(ctx, both[0]), w.fence.restore(ctx, both[1]))
}

func (w withFence) Close() error { return errors.Join(w.fence.close(), w.Rewindable.Close()) }

// errNoUserTransactions reports a backend whose store cannot run the
// guarded write in the user's transaction.
var errNoUserTransactions = errors.New("the backend's store has no user transactions")

// txGuarded is the guarded write in the user's transaction: the fence
// table of package fence kept in the database that holds the leases, and
// each write one transaction of the user's that checks the writer's lease
// is live at the write's tick and then offers the write to the fence.
type txGuarded struct {
	fence *txFence
	users backend.UserTransactions
}

var _ leases.GuardedReceiver = (*txGuarded)(nil)

func openTxGuarded(ctx context.Context, users backend.UserTransactions) (*txGuarded, error) {
	f, err := fenceOn(ctx, users.UserDB())
	if err != nil {
		return nil, err
	}
	// Closing the store closes the database: the fence's close is only
	// its statements'.
	f.shared = true
	return &txGuarded{fence: f, users: users}, nil
}

// Write is one user's transaction: the lease check, then the fence.
func (g *txGuarded) Write(ctx context.Context, held leases.Lease, now int64, value string) (leases.WriteResult, error) {
	return inTx(ctx, g.fence.db, func(tx *sql.Tx) (leases.WriteResult, error) {
		live, err := g.users.LiveIn(ctx, tx, held, now)
		if err != nil {
			return leases.WriteResult{}, err
		}
		if !live {
			record, _, err := g.fence.table.Read(ctx, tx, held.Resource)
			return leases.WriteResult{Outcome: leases.NotLive, Record: record}, err
		}
		return g.fence.table.Write(ctx, tx, held.Resource, held.Epoch, value)
	})
}

// Read is the fence's record, in a transaction of its own.
func (g *txGuarded) Read(ctx context.Context, resource string) (leases.Record, bool, error) {
	return g.fence.Read(ctx, resource)
}
