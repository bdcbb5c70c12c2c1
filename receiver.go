package leases

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

const receiverSchema = `CREATE TABLE IF NOT EXISTS receiver_records (
	resource TEXT PRIMARY KEY,
	epoch    INTEGER NOT NULL CHECK (epoch >= 1), -- highest epoch committed (fenced) or last one (unfenced)
	value    TEXT NOT NULL
) STRICT`

// Mode says whether a receiver checks the epoch that comes with a write.
type Mode string

const (
	// Fenced receivers compare the incoming epoch with the stored one and
	// apply the outcomes documented on [Outcome].
	Fenced Mode = "fenced"
	// Unfenced receivers store whatever comes last, epoch and all, without
	// comparing: the baseline that shows what a lease alone does not stop.
	Unfenced Mode = "unfenced"
)

// Outcome is what a receiver did with one write.
type Outcome string

const (
	// Accepted: the write was stored. For a fenced receiver the incoming
	// epoch was higher than the stored one, or nothing was stored yet.
	Accepted Outcome = "accepted"
	// Replay: same epoch and same value as stored; nothing changed. A
	// retried write is safe.
	Replay Outcome = "replay"
	// Conflict: same epoch, different value; rejected, nothing changed.
	// One replacement value per resource per epoch.
	Conflict Outcome = "conflict"
	// Stale: the incoming epoch is below the stored one; rejected, nothing
	// changed. This is the fence.
	Stale Outcome = "stale"
)

// Stored reports whether the write changed the receiver's record.
func (o Outcome) Stored() bool { return o == Accepted }

// Record is what a receiver holds for one resource: the epoch that came
// with the stored value, and the value.
type Record struct {
	Epoch int64  `json:"epoch"`
	Value string `json:"value"`
}

// WriteResult is the outcome of one write and the receiver's record right
// after it, read in the same transaction.
type WriteResult struct {
	Outcome Outcome `json:"outcome"`
	Record  Record  `json:"record"`
}

// Receiver is the shared resource that lease holders write to. It keeps its
// own table and never reads the authority's: the only thing it knows about
// leases is the epochs that writers bring.
type Receiver struct {
	db   *sql.DB
	mode Mode
}

// Mode reports whether the receiver is fenced.
func (r *Receiver) Mode() Mode { return r.mode }

// Write offers value for resource, tagged with the writer's epoch. The
// comparison with the stored epoch and the store itself are one
// transaction, so no other write can slip between them.
func (r *Receiver) Write(ctx context.Context, resource string, epoch int64, value string) (WriteResult, error) {
	if err := firstError(r.checkMode(), checkName("resource", resource), checkEpoch(epoch),
		checkText("value", value, MaxValueBytes, true)); err != nil {
		return WriteResult{}, err
	}
	var result WriteResult
	err := inTransaction(ctx, r.db, func(tx *sql.Tx) error {
		stored, found, err := readRecord(ctx, tx, resource)
		if err != nil {
			return err
		}
		result = WriteResult{Outcome: r.decide(stored, found, epoch, value), Record: stored}
		pauseInsideTransaction("write")
		if result.Outcome != Accepted {
			return nil
		}
		result.Record = Record{Epoch: epoch, Value: value}
		_, err = tx.ExecContext(ctx, `INSERT INTO receiver_records (resource, epoch, value) VALUES (?, ?, ?)
			ON CONFLICT (resource) DO UPDATE SET epoch = excluded.epoch, value = excluded.value`,
			resource, epoch, value)
		return err
	})
	if err != nil {
		return WriteResult{}, fmt.Errorf("write %q at epoch %d: %w", resource, epoch, err)
	}
	return result, nil
}

// decide applies the receiver's rule to one incoming write.
func (r *Receiver) decide(stored Record, found bool, epoch int64, value string) Outcome {
	switch {
	case r.mode == Unfenced, !found, epoch > stored.Epoch:
		return Accepted
	case epoch < stored.Epoch:
		return Stale
	case value == stored.Value:
		return Replay
	default:
		return Conflict
	}
}

// Read returns the record stored for resource; found is false when nothing
// has been written yet.
func (r *Receiver) Read(ctx context.Context, resource string) (record Record, found bool, err error) {
	if err := checkName("resource", resource); err != nil {
		return Record{}, false, err
	}
	err = inTransaction(ctx, r.db, func(tx *sql.Tx) error {
		record, found, err = readRecord(ctx, tx, resource)
		return err
	})
	if err != nil {
		return Record{}, false, fmt.Errorf("read %q: %w", resource, err)
	}
	return record, found, nil
}

func (r *Receiver) checkMode() error {
	if r.mode != Fenced && r.mode != Unfenced {
		return fmt.Errorf("%w: receiver mode %q is neither %q nor %q", ErrInvalidInput, r.mode, Fenced, Unfenced)
	}
	return nil
}

func readRecord(ctx context.Context, tx *sql.Tx, resource string) (Record, bool, error) {
	var rec Record
	err := tx.QueryRowContext(ctx, `SELECT epoch, value FROM receiver_records WHERE resource = ?`, resource).
		Scan(&rec.Epoch, &rec.Value)
	if errors.Is(err, sql.ErrNoRows) {
		return Record{}, false, nil
	}
	if err != nil {
		return Record{}, false, fmt.Errorf("read record: %w", err)
	}
	return rec, true, nil
}
