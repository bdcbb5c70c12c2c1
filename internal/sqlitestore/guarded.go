package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"

	"leases"
	"leases/internal/rules"
)

// guardedSchema is the guarded receiver's table, shaped like the fenced
// one and kept apart from it.
const guardedSchema = `CREATE TABLE IF NOT EXISTS guarded_records (
	resource    TEXT PRIMARY KEY,
	epoch       INTEGER NOT NULL CHECK (epoch >= 1),
	value_epoch INTEGER CHECK (value_epoch >= 1),
	value       TEXT,
	CHECK ((value IS NULL) = (value_epoch IS NULL) AND value_epoch <= epoch)
) STRICT`

// GuardedReceiver is a guarded receiver on one store. Unlike the seed's
// receivers, its write transaction reads the authority's table: that is
// the protocol, and the reason it closes the gap. It is therefore outside
// clause C5, which keeps the authority and the receiver apart.
type GuardedReceiver struct {
	store *Store
}

var _ leases.GuardedReceiver = (*GuardedReceiver)(nil)

// Write implements [leases.GuardedReceiver.Write]: one BEGIN IMMEDIATE
// transaction reads the lease and the record, asks rules.Guarded, and
// writes the answer.
func (g *GuardedReceiver) Write(ctx context.Context, held leases.Lease, now int64, value string) (leases.WriteResult, error) {
	if err := rules.CheckGuarded(held, now, value); err != nil {
		return leases.WriteResult{}, err
	}
	var result leases.WriteResult
	err := g.store.inTransaction(ctx, func(tx *sql.Tx) error {
		row, found, err := g.store.Authority().read(ctx, tx, held.Resource)
		if err != nil {
			return err
		}
		stored, storedFound, err := g.read(ctx, tx, held.Resource)
		if err != nil {
			return err
		}
		if result, err = rules.Guarded(row, found, held, now, stored, storedFound, value); err != nil {
			return err
		}
		pauseInsideTransaction("guarded-write")
		if result.Outcome != leases.Accepted {
			return nil
		}
		return g.store.sql.exec(ctx, tx, sqlWriteGuarded, held.Resource, held.Epoch, held.Epoch, value)
	})
	if err != nil {
		return leases.WriteResult{}, fmt.Errorf("guarded write %q at epoch %d at tick %d: %w", held.Resource, held.Epoch, now, err)
	}
	return result, nil
}

// Read implements [leases.GuardedReceiver.Read].
func (g *GuardedReceiver) Read(ctx context.Context, resource string) (record leases.Record, found bool, err error) {
	if err := rules.CheckName("resource", resource); err != nil {
		return leases.Record{}, false, err
	}
	err = g.store.inTransaction(ctx, func(tx *sql.Tx) error {
		record, found, err = g.read(ctx, tx, resource)
		return err
	})
	if err != nil {
		return leases.Record{}, false, fmt.Errorf("read %q: %w", resource, err)
	}
	return record, found, nil
}

func (g *GuardedReceiver) read(ctx context.Context, tx *sql.Tx, resource string) (leases.Record, bool, error) {
	return g.store.readRecord(ctx, tx, sqlReadGuarded, resource)
}
