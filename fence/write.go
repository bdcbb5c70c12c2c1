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

// Write offers value for resource at epoch, inside tx, and reports what
// the fenced receiver's rule decided, with the record as it stands in tx
// afterwards. Only an Accepted write changed the table: store your own
// rows in tx, and commit, only then. A Replay means an earlier transaction
// with this epoch and value committed already; Conflict and Stale mean
// that this holder must not act.
//
// Invalid input is refused with [leases.ErrInvalidInput] before any
// statement runs. Any other error leaves tx to be rolled back (see the
// package documentation).
func (t *Table) Write(ctx context.Context, tx *sql.Tx, resource string, epoch int64, value string) (leases.WriteResult, error) {
	return t.write(ctx, unprepared{}, tx, resource, epoch, value)
}

func (t *Table) write(ctx context.Context, run runner, tx *sql.Tx, resource string, epoch int64, value string) (leases.WriteResult, error) {
	if err := rules.CheckWrite(leases.Fenced, resource, epoch, value); err != nil {
		return leases.WriteResult{}, err
	}
	// The count of rows the upsert affected says whether it stored, and
	// then the record is the write's own: no RETURNING, which cost as much
	// as the rest of the transaction on SQLite in memory.
	result, err := t.settle(ctx, run, tx, resource, func() (bool, leases.Record, error) {
		changed, err := run.exec(ctx, tx, t.sql.write, resource, epoch, value)
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

// Observe raises the fence for resource to epoch inside tx, without a
// value: once tx commits, every write with a lower epoch is Stale. The
// stored value is kept, and the first write at epoch is accepted. The
// outcome is Accepted when the fence rose, Replay when it was at epoch
// already, and Stale when a higher epoch was committed before: the caller
// has been superseded and must not act. Errors as for [Table.Write].
func (t *Table) Observe(ctx context.Context, tx *sql.Tx, resource string, epoch int64) (leases.WriteResult, error) {
	return t.observe(ctx, unprepared{}, tx, resource, epoch)
}

func (t *Table) observe(ctx context.Context, run runner, tx *sql.Tx, resource string, epoch int64) (leases.WriteResult, error) {
	return t.raise(ctx, run, tx, "observe", t.sql.observe, rules.Observe, resource, epoch, nil)
}

// raise runs one of the statements that raise the fence to epoch and keep
// the value (an observe's, an admit's), deciding with rule; verb names the
// call in errors. The admit's statement takes a marker too (m, nil for
// an observe): see markers.
func (t *Table) raise(ctx context.Context, run runner, tx *sql.Tx, verb, statement string,
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
	result, err := t.settle(ctx, run, tx, resource, func() (bool, leases.Record, error) {
		stored, found, err := scanRecord(run.queryRow(ctx, tx, statement, args...), scans...)
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

// Admit lets tx act for the holder of epoch only while epoch is the
// newest epoch the table has seen for resource: the guard for a tenure
// that runs any number of transactions, beside Write's one value per
// epoch. Admitted (Accepted), the fence is at epoch and its row is locked
// until tx ends, so that no transaction of a newer tenure can raise the
// fence, and no older one be admitted, before tx commits or rolls back:
// store your own rows in tx, and commit. Stale means a newer epoch has
// reached the table: this holder has been superseded and must not act.
// The stored value is kept either way.
//
// A holder calls it first in each of its transactions, after having
// observed its epoch once when its tenure began (see [Table.Tenure],
// which does both). Errors as for [Table.Write].
func (t *Table) Admit(ctx context.Context, tx *sql.Tx, resource string, epoch int64) (leases.WriteResult, error) {
	result, _, err := t.admit(ctx, unprepared{}, tx, resource, epoch)
	return result, err
}

// admit is Admit with the marker of the admitted transaction, which
// Tenure.Resolve needs to tell whether it committed.
func (t *Table) admit(ctx context.Context, run runner, tx *sql.Tx, resource string, epoch int64) (leases.WriteResult, guard.Marker, error) {
	m := newMarker()
	result, err := t.raise(ctx, run, tx, "admit", t.sql.admit, rules.Admit, resource, epoch, &m)
	return result, m, err
}

// Read returns the record of resource as tx sees it; found is false while
// the resource has none. It takes no lock: decide nothing on it that you
// then write, Write and Observe decide and store in one statement.
func (t *Table) Read(ctx context.Context, tx *sql.Tx, resource string) (record leases.Record, found bool, err error) {
	return t.read(ctx, unprepared{}, tx, resource)
}

func (t *Table) read(ctx context.Context, run runner, tx *sql.Tx, resource string) (record leases.Record, found bool, err error) {
	if err := rules.CheckName("resource", resource); err != nil {
		return leases.Record{}, false, err
	}
	record, found, err = scanRecord(run.queryRow(ctx, tx, t.sql.read, resource))
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
func (t *Table) settle(ctx context.Context, run runner, tx *sql.Tx, resource string,
	upsert func() (stored bool, record leases.Record, err error),
	decide func(stored leases.Record) leases.WriteResult) (leases.WriteResult, error) {
	accepted, record, err := upsert()
	if err != nil {
		return leases.WriteResult{}, err
	}
	if accepted {
		return leases.WriteResult{Outcome: leases.Accepted, Record: record}, nil
	}
	stored, found, err := scanRecord(run.queryRow(ctx, tx, t.sql.readRejecting, resource))
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

// runner runs one of the table's statements in tx, as text or prepared.
type runner interface {
	exec(ctx context.Context, tx *sql.Tx, statement string, args ...any) (sql.Result, error)
	queryRow(ctx context.Context, tx *sql.Tx, statement string, args ...any) *sql.Row
}

// unprepared hands the statement's text to the driver each time.
type unprepared struct{}

func (unprepared) exec(ctx context.Context, tx *sql.Tx, statement string, args ...any) (sql.Result, error) {
	return tx.ExecContext(ctx, statement, args...)
}

func (unprepared) queryRow(ctx context.Context, tx *sql.Tx, statement string, args ...any) *sql.Row {
	return tx.QueryRowContext(ctx, statement, args...)
}
