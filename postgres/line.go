package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"leases/internal/rules"
)

// The Lessor's lines (see leases.Lessor): who waits for which resource,
// in the order they were first refused (seq), and until which tick of the
// server's clock each keeps its place (see rules.Place). Every statement
// on a line runs in an acquire that holds the resource's lease row FOR
// UPDATE, so the acquires of one resource meet the line one after the
// other. Under READ COMMITTED (the default) each sees every place
// committed before it; under REPEATABLE READ and SERIALIZABLE a decision
// sees the places of its snapshot, and may miss one that a concurrent
// refusal committed after it: a waiter can then be overtaken once.
const (
	lineSchemaTemplate = `CREATE TABLE IF NOT EXISTS "{line}" (
	resource text NOT NULL,
	holder   text NOT NULL,
	until    bigint NOT NULL,
	seq      bigint GENERATED ALWAYS AS IDENTITY,
	PRIMARY KEY (resource, holder)
)`
	// readLineTemplate reads the places still running at tick $2, in
	// arrival order, and in the same statement removes those whose time
	// has passed and, when no running place came before it, the place of
	// $3, the acquiring holder, which the grant then takes (rules.Ahead
	// decides the same on the rows read): a grant to the first in line
	// costs no statement of its own to leave the line. The read sees the
	// rows as they were before the removals, hence its own condition.
	readLineTemplate = `WITH ended AS (DELETE FROM "{line}" WHERE resource = $1 AND until <= $2),
	granted AS (DELETE FROM "{line}" AS mine WHERE resource = $1 AND holder = $3 AND until > $2 AND NOT EXISTS (
		SELECT 1 FROM "{line}" AS ahead WHERE ahead.resource = $1 AND ahead.until > $2 AND ahead.seq < mine.seq))
	SELECT holder, until FROM "{line}" WHERE resource = $1 AND until > $2 ORDER BY seq`
	joinLineTemplate = `INSERT INTO "{line}" (resource, holder, until) VALUES ($1, $2, $3)
	ON CONFLICT (resource, holder) DO UPDATE SET until = greatest("{line}".until, excluded.until)`
	readPlaceTemplate = `SELECT until FROM "{line}" WHERE resource = $1 AND holder = $2`
	// notifyTemplate tells the store's listeners (see listener) that a
	// resource's lease changed, when the transaction commits.
	notifyTemplate = `SELECT pg_catalog.pg_notify($1, $2)`
)

// lineStatements are a store's statements on its lines.
type lineStatements struct {
	schema, read, join, place string
}

func newLineStatements(table string) lineStatements {
	names := strings.NewReplacer("{line}", table)
	return lineStatements{schema: names.Replace(lineSchemaTemplate), read: names.Replace(readLineTemplate),
		join:  names.Replace(joinLineTemplate),
		place: names.Replace(readPlaceTemplate)}
}

// lineTx is a resource's line in one transaction (rules.LineTx), for
// the acquire of holder.
type lineTx struct {
	s      *Store
	tx     *sql.Tx
	holder string
}

func (l *lineTx) Line(ctx context.Context, resource string, now int64) ([]rules.Waiter, error) {
	rows, err := l.tx.QueryContext(ctx, l.s.lines.read, resource, now, l.holder)
	if err != nil {
		return nil, fmt.Errorf("read the line: %w", err)
	}
	return rules.ScanLine(rows)
}

func (l *lineTx) Place(ctx context.Context, resource, holder string) (int64, error) {
	var until int64
	err := l.tx.QueryRowContext(ctx, l.s.lines.place, resource, holder).Scan(&until)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("read the place in line: %w", err)
	}
	return until, nil
}

func (l *lineTx) Join(ctx context.Context, resource, holder string, until int64) error {
	if _, err := l.tx.ExecContext(ctx, l.s.lines.join, resource, holder, until); err != nil {
		return fmt.Errorf("join the line: %w", err)
	}
	return nil
}

// Leave is done: Line removed holder's place when it was first.
func (l *lineTx) Leave(context.Context, string, string) error { return nil }

// notify tells the store's listeners, once tx commits, that resource's
// lease was released. A grant does not notify: a waiter needs no news of
// it (it comes back at the end of the place it was told of), and the
// statement would lengthen every grant's transaction.
func (s *Store) notify(ctx context.Context, tx *sql.Tx, resource string) error {
	if _, err := tx.ExecContext(ctx, notifyTemplate, s.names.authority, resource); err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	return nil
}
