package fence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"leases"
	"leases/internal/guard"
	"leases/internal/rules"
)

// errDisagree reports that the table's answer contradicts the receiver
// rule: a bug, or a table of that name that is not this schema or whose
// rows were changed by hand.
var errDisagree = errors.New("the fence table and the receiver rule disagree")

// Write is the contract's fenced receiver inside tx, a transaction of the
// table's database: one value per resource and epoch, which the evidence
// explores; a service's transactions go through a Tenure. It offers
// value for resource at epoch and reports what the fenced receiver's rule
// decided, with the record as it stands in tx
// afterwards. Only an Accepted write changed the table: store your own
// rows in tx, and commit, only then. A Replay means an earlier transaction
// with this epoch and value committed already; Conflict and Stale mean
// that this holder must not act.
//
// Invalid input is refused with [leases.ErrInvalidInput] before any
// statement runs. Any other error leaves tx to be rolled back (see the
// package documentation).
func (t *Table) Write(ctx context.Context, tx *sql.Tx, resource string, epoch int64, value string) (leases.WriteResult, error) {
	return t.write(ctx, tx, resource, epoch, value)
}

func (t *Table) write(ctx context.Context, tx *sql.Tx, resource string, epoch int64, value string) (leases.WriteResult, error) {
	if err := rules.CheckWrite(leases.Fenced, resource, epoch, value); err != nil {
		return leases.WriteResult{}, err
	}
	// The count of rows the upsert affected says whether it stored, and
	// then the record is the write's own: no RETURNING, which cost as much
	// as the rest of the transaction on SQLite in memory.
	result, err := t.settle(ctx, tx, resource, func() (bool, leases.Record, error) {
		changed, err := t.stmts.Exec(ctx, tx, t.sql.write, resource, epoch, value)
		if err != nil {
			return false, leases.Record{}, err
		}
		n, err := changed.RowsAffected()
		if err != nil {
			return false, leases.Record{}, fmt.Errorf("rows affected: %w", err)
		}
		if n > 1 {
			return false, leases.Record{}, fmt.Errorf("%w: %d rows written", errDisagree, n)
		}
		return n == 1, leases.Record{Epoch: epoch, ValueEpoch: epoch, Value: value}, nil
	}, func(stored leases.Record) leases.WriteResult {
		return rules.Write(leases.Fenced, stored, true, epoch, value)
	})
	if err != nil {
		return leases.WriteResult{}, fmt.Errorf("fence %s: write %q at epoch %d: %w", t.name, resource, epoch, err)
	}
	return result, nil
}

// observe raises the fence for resource to epoch inside tx, without a
// value: once tx commits, every write with a lower epoch is Stale. The
// stored value is kept, and the first write at epoch is accepted. The
// outcome is Accepted when the fence rose, Replay when it was at epoch
// already, and Stale when a higher epoch was committed before.
func (t *Table) observe(ctx context.Context, tx *sql.Tx, resource string, epoch int64) (leases.WriteResult, error) {
	return t.raise(ctx, tx, "observe", t.sql.observe, rules.Observe, resource, epoch, nil)
}

// raise runs one of the statements that raise the fence to epoch and keep
// the value (an observe's, an admit's), deciding with rule; verb names the
// call in errors. The admit's statement takes a marker too (m, nil for
// an observe): see markers.
func (t *Table) raise(ctx context.Context, tx *sql.Tx, verb, statement string,
	rule func(stored leases.Record, found bool, epoch int64) leases.WriteResult,
	resource string, epoch int64, m *guard.Marker) (leases.WriteResult, error) {
	if err := rules.CheckObserve(leases.Fenced, resource, epoch); err != nil {
		return leases.WriteResult{}, err
	}
	args, scans := []any{resource, epoch}, []any(nil)
	if m != nil {
		args, scans = markerArgs(m, args), markerScans(m)
	}
	// The value is kept: the upsert returns the row it stored.
	result, err := t.settle(ctx, tx, resource, func() (bool, leases.Record, error) {
		stored, found, err := scanRecord(t.stmts.QueryRow(ctx, tx, statement, args...), scans...)
		if err == nil && found && stored.Epoch != epoch {
			err = fmt.Errorf("%w: stored epoch %d instead of %d", errDisagree, stored.Epoch, epoch)
		}
		return found, stored, err
	}, func(stored leases.Record) leases.WriteResult {
		return rule(stored, true, epoch)
	})
	if err != nil {
		return leases.WriteResult{}, fmt.Errorf("fence %s: %s %q at epoch %d: %w", t.name, verb, resource, epoch, err)
	}
	return result, nil
}

// admit lets tx act for the holder of epoch only while epoch is the
// newest epoch the table has seen for resource: admitted (Accepted), the
// fence is at epoch and its row is locked until tx ends, so that no
// transaction of a newer tenure can raise the fence, and no older one be
// admitted, before tx commits or rolls back; Stale means a newer epoch
// has reached the table. The stored value is kept either way. The marker
// of the admitted transaction is what Tenure.Resolve needs to tell
// whether it committed.
func (t *Table) admit(ctx context.Context, tx *sql.Tx, resource string, epoch int64) (leases.WriteResult, guard.Marker, error) {
	m := newMarker()
	result, err := t.raise(ctx, tx, "admit", t.sql.admit, rules.Admit, resource, epoch, &m)
	return result, m, err
}

// Read returns the record of resource as tx sees it; found is false while
// the resource has none. It takes no lock: decide nothing on it that you
// then write, Write and Observe decide and store in one statement.
func (t *Table) Read(ctx context.Context, tx *sql.Tx, resource string) (record leases.Record, found bool, err error) {
	return t.read(ctx, tx, resource)
}

func (t *Table) read(ctx context.Context, tx *sql.Tx, resource string) (record leases.Record, found bool, err error) {
	if err := rules.CheckName("resource", resource); err != nil {
		return leases.Record{}, false, err
	}
	record, found, err = scanRecord(t.stmts.QueryRow(ctx, tx, t.sql.read, resource))
	if err != nil {
		return leases.Record{}, false, fmt.Errorf("fence %s: read %q: %w", t.name, resource, err)
	}
	return record, found, nil
}

// settle runs upsert, one of the conditional upserts, which reports
// whether it stored and, if so, the record it left. If it did not, the
// rule's condition was false: the row that rejected it is read (locked,
// where the database has row locks) and decide names the outcome, which
// then must not be Accepted.
func (t *Table) settle(ctx context.Context, tx *sql.Tx, resource string,
	upsert func() (stored bool, record leases.Record, err error),
	decide func(stored leases.Record) leases.WriteResult) (leases.WriteResult, error) {
	accepted, record, err := upsert()
	if err != nil {
		return leases.WriteResult{}, err
	}
	if accepted {
		return leases.WriteResult{Outcome: leases.Accepted, Record: record}, nil
	}
	stored, found, err := scanRecord(t.stmts.QueryRow(ctx, tx, t.sql.readRejecting, resource))
	if err != nil {
		return leases.WriteResult{}, fmt.Errorf("read the rejecting row: %w", err)
	}
	if !found {
		return leases.WriteResult{}, fmt.Errorf("%w: nothing stored and no row found", errDisagree)
	}
	result := decide(stored)
	if result.Outcome == leases.Accepted {
		return leases.WriteResult{}, fmt.Errorf("%w: rejected, yet the rule accepts over %+v", errDisagree, stored)
	}
	return result, nil
}

// scanRecord reads one row of the table, or reports that there was none;
// extra are the destinations of the columns after the record's.
func scanRecord(row *sql.Row, extra ...any) (leases.Record, bool, error) {
	var record leases.Record
	var valueEpoch sql.NullInt64
	var value sql.NullString
	err := row.Scan(append([]any{&record.Epoch, &valueEpoch, &value}, extra...)...)
	if errors.Is(err, sql.ErrNoRows) {
		return leases.Record{}, false, nil
	}
	if err != nil {
		return leases.Record{}, false, err
	}
	record.ValueEpoch, record.Value = valueEpoch.Int64, value.String
	return record, true, nil
}
