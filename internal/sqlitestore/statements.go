package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Every statement the authority and the receivers run. Each reads or
// writes one table only: no statement spans two tables. (The guarded
// receiver's transaction runs two of them, by design: see guarded.go.)
const (
	sqlReadLease = `SELECT epoch, holder, granted_at, expires_at, last_tick
		FROM authority_leases WHERE resource = ?`
	// Grant, renew and release all store the whole row that package rules
	// decided on.
	sqlPutLease = `INSERT INTO authority_leases
		(resource, epoch, holder, granted_at, expires_at, last_tick) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (resource) DO UPDATE SET epoch = excluded.epoch, holder = excluded.holder,
		granted_at = excluded.granted_at, expires_at = excluded.expires_at, last_tick = excluded.last_tick`
	// The rows that may hold a live lease at tick ?: the Lessor's listing
	// decides on each with package rules.
	sqlListHeld = `SELECT resource, epoch, holder, granted_at, expires_at, last_tick
		FROM authority_leases WHERE holder IS NOT NULL AND expires_at > ? ORDER BY resource`

	sqlReadRecord  = `SELECT epoch, value_epoch, value FROM receiver_records WHERE resource = ?`
	sqlWriteRecord = `INSERT INTO receiver_records (resource, epoch, value_epoch, value) VALUES (?, ?, ?, ?)
		ON CONFLICT (resource) DO UPDATE SET epoch = excluded.epoch, value_epoch = excluded.value_epoch, value = excluded.value`
	sqlObserveRecord = `INSERT INTO receiver_records (resource, epoch) VALUES (?, ?)
		ON CONFLICT (resource) DO UPDATE SET epoch = excluded.epoch`

	// The unfenced receiver's value always came with its epoch.
	sqlReadUnfenced  = `SELECT epoch, epoch, value FROM unfenced_records WHERE resource = ?`
	sqlWriteUnfenced = `INSERT INTO unfenced_records (resource, epoch, value) VALUES (?, ?, ?)
		ON CONFLICT (resource) DO UPDATE SET epoch = excluded.epoch, value = excluded.value`

	// The guarded receiver's records: a table like the fenced one.
	sqlReadGuarded  = `SELECT epoch, value_epoch, value FROM guarded_records WHERE resource = ?`
	sqlWriteGuarded = `INSERT INTO guarded_records (resource, epoch, value_epoch, value) VALUES (?, ?, ?, ?)
		ON CONFLICT (resource) DO UPDATE SET epoch = excluded.epoch, value_epoch = excluded.value_epoch, value = excluded.value`
)

// prepared holds every statement compiled once per store: parsing SQL
// again for each operation cost about as much as running it.
type prepared struct {
	byText map[string]*sql.Stmt
	// written tracks which tables a statement may have written to since
	// the last snapshot read them (see snapshot.go).
	written written
}

func prepare(ctx context.Context, db *sql.DB) (*prepared, error) {
	p := &prepared{byText: map[string]*sql.Stmt{}}
	for _, text := range append([]string{
		sqlReadLease, sqlPutLease, sqlListHeld,
		sqlReadRecord, sqlWriteRecord, sqlObserveRecord, sqlReadUnfenced, sqlWriteUnfenced,
		sqlReadGuarded, sqlWriteGuarded,
	}, append(lineStatements, snapshotStatements()...)...) {
		stmt, err := db.PrepareContext(ctx, text)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("prepare: %w", err), p.close())
		}
		p.byText[text] = stmt
	}
	return p, nil
}

// exec runs a prepared statement inside tx, on tx's connection.
func (p *prepared) exec(ctx context.Context, tx *sql.Tx, text string, args ...any) error {
	p.written.mark(text)
	_, err := tx.StmtContext(ctx, p.byText[text]).ExecContext(ctx, args...)
	return err
}

// queryRow runs a prepared query inside tx, on tx's connection.
func (p *prepared) queryRow(ctx context.Context, tx *sql.Tx, text string, args ...any) *sql.Row {
	return tx.StmtContext(ctx, p.byText[text]).QueryRowContext(ctx, args...)
}

func (p *prepared) close() error {
	var errs []error
	for _, stmt := range p.byText {
		errs = append(errs, stmt.Close())
	}
	return errors.Join(errs...)
}
