package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"leases"
	"leases/internal/rules"
)

// lineSchema is the Lessor's lines: who waits for which resource, in the
// order they were first refused (rowid: a new row's is above every row's
// of the table), and until when each keeps its place (see rules.Place).
// A grant removes its holder's row, and a decision on a free lease the
// rows whose time has passed.
const lineSchema = `CREATE TABLE IF NOT EXISTS authority_line (
	resource TEXT NOT NULL,
	holder   TEXT NOT NULL,
	until    INTEGER NOT NULL,
	PRIMARY KEY (resource, holder)
) STRICT`

// The line's statements; each reads or writes the line's table only.
const (
	sqlReadLine  = `SELECT holder, until FROM authority_line WHERE resource = ? ORDER BY rowid`
	sqlPruneLine = `DELETE FROM authority_line WHERE resource = ? AND until <= ?`
	sqlJoinLine  = `INSERT INTO authority_line (resource, holder, until) VALUES (?, ?, ?)
		ON CONFLICT (resource, holder) DO UPDATE SET until = max(until, excluded.until)`
	sqlLeaveLine = `DELETE FROM authority_line WHERE resource = ? AND holder = ?`
	sqlReadPlace = `SELECT until FROM authority_line WHERE resource = ? AND holder = ?`
)

// lineStatements are the line's statements, prepared with the others.
var lineStatements = []string{sqlReadLine, sqlPruneLine, sqlJoinLine, sqlLeaveLine, sqlReadPlace}

// errWrite is a look's answer (see lookInLine) when only a write
// transaction can decide.
var errWrite = errors.New("a decision that writes")

// lineTx is a resource's line in one transaction (rules.LineTx); one
// that may not write (a look) fails with errWrite where it would.
type lineTx struct {
	a     *Authority
	tx    *sql.Tx
	write bool
}

func (l lineTx) Line(ctx context.Context, resource string, now int64) ([]rules.Waiter, error) {
	if l.write {
		if err := l.a.store.sql.exec(ctx, l.tx, sqlPruneLine, resource, now); err != nil {
			return nil, fmt.Errorf("prune the line: %w", err)
		}
	}
	rows, err := l.tx.StmtContext(ctx, l.a.store.sql.byText[sqlReadLine]).QueryContext(ctx, resource)
	if err != nil {
		return nil, fmt.Errorf("read the line: %w", err)
	}
	return rules.ScanLine(rows)
}

func (l lineTx) Place(ctx context.Context, resource, holder string) (int64, error) {
	var until int64
	err := l.a.store.sql.queryRow(ctx, l.tx, sqlReadPlace, resource, holder).Scan(&until)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("read the place in line: %w", err)
	}
	return until, nil
}

func (l lineTx) Join(ctx context.Context, resource, holder string, until int64) error {
	if !l.write {
		return errWrite
	}
	if err := l.a.store.sql.exec(ctx, l.tx, sqlJoinLine, resource, holder, until); err != nil {
		return fmt.Errorf("join the line: %w", err)
	}
	return nil
}

func (l lineTx) Leave(ctx context.Context, resource, holder string) error {
	if !l.write {
		return errWrite
	}
	if err := l.a.store.sql.exec(ctx, l.tx, sqlLeaveLine, resource, holder); err != nil {
		return fmt.Errorf("leave the line: %w", err)
	}
	return nil
}

// lookInLine decides holder's acquire of resource in a read transaction,
// which takes no write lock, when it can: a refusal that leaves holder's
// place in line as it is (a live lease, or a free one kept for the waiter
// ahead). It returns nil when only a write transaction can decide (a
// grant, a place to write) or when the look failed: the acquire then
// decides in one. Waiters woken by a release thus leave the file's write
// lock to the one they wait behind.
func (a *Authority) lookInLine(ctx context.Context, resource, holder string, tick rules.TickFunc, ttl int64) error {
	var queued error
	var now int64
	_ = a.store.run(ctx, &sql.TxOptions{ReadOnly: true}, func(tx *sql.Tx) (bool, error) {
		row, found, err := a.read(ctx, tx, resource)
		if err != nil {
			return false, err
		}
		if now, err = tick(row, found, ttl); err != nil {
			return false, err
		}
		_, _, err = rules.Acquire(row, found, resource, holder, now, ttl)
		if queued, err = rules.InLine(ctx, lineTx{a, tx, false}, resource, holder, now, ttl, err); err != nil {
			queued = nil // a place to write, a grant, or a look that failed
		}
		return false, err
	})
	if queued == nil {
		return nil
	}
	_, err := rules.Granted(leases.Lease{}, queued, resource, holder, now)
	return err
}
