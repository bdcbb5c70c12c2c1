package leases

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

const receiverSchema = `CREATE TABLE IF NOT EXISTS receiver_records (
	resource    TEXT PRIMARY KEY,
	epoch       INTEGER NOT NULL CHECK (epoch >= 1), -- fenced: highest epoch committed, by a write or an observe
	value_epoch INTEGER CHECK (value_epoch >= 1),    -- the epoch the value came with; NULL before any value
	value       TEXT,
	CHECK ((value IS NULL) = (value_epoch IS NULL) AND value_epoch <= epoch)
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

// Record is what a receiver holds for one resource.
type Record struct {
	// Epoch is the highest epoch the receiver has committed for the
	// resource: the fence. Unfenced receivers store the last write's.
	Epoch int64 `json:"epoch"`
	// ValueEpoch is the epoch the stored value came with; it is below
	// Epoch only after an Observe of a newer epoch, and 0 while no value
	// has been stored.
	ValueEpoch int64 `json:"value_epoch"`
	// Value is the stored value.
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
	store *Store
	mode  Mode
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
	err := r.store.inTransaction(ctx, func(tx *sql.Tx) error {
		var stored Record
		found := false
		if r.mode == Fenced { // an unfenced receiver has nothing to compare
			var err error
			if stored, found, err = readRecord(ctx, r.store.sql, tx, resource); err != nil {
				return err
			}
		}
		result = WriteResult{Outcome: r.decide(stored, found, epoch, value), Record: stored}
		pauseInsideTransaction("write")
		if result.Outcome != Accepted {
			return nil
		}
		result.Record = Record{Epoch: epoch, ValueEpoch: epoch, Value: value}
		if err := r.store.sql.exec(ctx, tx, sqlWriteRecord, resource, epoch, epoch, value); err != nil {
			return err
		}
		pauseInsideTransaction("write-written")
		return nil
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
	case stored.ValueEpoch < stored.Epoch:
		// The epoch was observed ahead of its holder's first write.
		return Accepted
	case value == stored.Value:
		return Replay
	default:
		return Conflict
	}
}

// Observe records epoch at a fenced receiver without a value, so that from
// now on every write with a lower epoch is stale. A new lease holder calls
// it right after acquiring and before it reads or acts: this closes the gap
// in which the old holder's write is still accepted. The stored value is
// kept (the new holder reads it); the first write at the observed epoch is
// accepted. The outcome is Accepted when the fence rose, Replay when it was
// already at epoch, and Stale when a higher epoch was committed before: the
// caller has been superseded and must not act.
func (r *Receiver) Observe(ctx context.Context, resource string, epoch int64) (WriteResult, error) {
	if r.mode != Fenced {
		return WriteResult{}, fmt.Errorf("%w: observe needs a %s receiver, not %q", ErrInvalidInput, Fenced, r.mode)
	}
	if err := firstError(checkName("resource", resource), checkEpoch(epoch)); err != nil {
		return WriteResult{}, err
	}
	var result WriteResult
	err := r.store.inTransaction(ctx, func(tx *sql.Tx) error {
		stored, found, err := readRecord(ctx, r.store.sql, tx, resource)
		if err != nil {
			return err
		}
		result = WriteResult{Outcome: Accepted, Record: stored}
		switch {
		case found && epoch < stored.Epoch:
			result.Outcome = Stale
		case found && epoch == stored.Epoch:
			result.Outcome = Replay
		}
		pauseInsideTransaction("observe")
		if result.Outcome != Accepted {
			return nil
		}
		result.Record.Epoch = epoch
		return r.store.sql.exec(ctx, tx, sqlObserveRecord, resource, epoch)
	})
	if err != nil {
		return WriteResult{}, fmt.Errorf("observe %q at epoch %d: %w", resource, epoch, err)
	}
	return result, nil
}

// Read returns the record stored for resource; found is false when nothing
// has been written yet.
func (r *Receiver) Read(ctx context.Context, resource string) (record Record, found bool, err error) {
	if err := checkName("resource", resource); err != nil {
		return Record{}, false, err
	}
	err = r.store.inTransaction(ctx, func(tx *sql.Tx) error {
		record, found, err = readRecord(ctx, r.store.sql, tx, resource)
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

func readRecord(ctx context.Context, p *prepared, tx *sql.Tx, resource string) (Record, bool, error) {
	var rec Record
	var valueEpoch sql.NullInt64
	var value sql.NullString
	err := p.queryRow(ctx, tx, sqlReadRecord, resource).Scan(&rec.Epoch, &valueEpoch, &value)
	rec.ValueEpoch, rec.Value = valueEpoch.Int64, value.String
	if errors.Is(err, sql.ErrNoRows) {
		return Record{}, false, nil
	}
	if err != nil {
		return Record{}, false, fmt.Errorf("read record: %w", err)
	}
	return rec, true, nil
}
