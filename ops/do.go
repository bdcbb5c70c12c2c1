package ops

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"leases"
	"leases/internal/guard"
	"leases/internal/sqltx"
)

// Call is one operation of a holder within its tenure.
type Call struct {
	// Resource and Epoch are the holder's lease: its resource, and the
	// epoch it was granted.
	Resource string
	Epoch    int64
	// Key names the operation among the tenure's: the same key is the
	// same operation (a retry), another key another operation.
	Key string
	// Request is what makes two calls with the same key the same
	// operation (say, the method, path and body): its SHA-256 is stored,
	// and a call with the same key and another Request is a Conflict.
	Request []byte
}

// Response is an operation's answer, stored with its record and given
// again to every replay.
type Response struct {
	Status int
	Type   string
	Body   []byte
}

// Result is what the record decided for a call.
type Result struct {
	// Outcome is Accepted (done now, or for Begin: pending, do the
	// effect), Replay (done before: Response is the stored answer, the
	// effect did not run again), Conflict (the key was used with another
	// Request), Stale (a newer epoch was admitted: Newest) or InProgress
	// (the first call with the key has not finished, or never will).
	Outcome leases.Outcome
	// Response is the answer when Accepted (by Do) or Replay.
	Response Response
	// Newest is the newest epoch admitted for the resource, when Stale.
	Newest int64
}

// Do performs call once, in one transaction of the table's database: it
// admits the epoch (Stale when below the newest admitted for the
// resource, and otherwise raises the newest to it), looks the operation
// up (Replay, Conflict, InProgress as Result says), and if it is new runs
// effect in the same transaction, stores effect's Response with the
// record, and commits: the effect's rows and the record commit together
// or not at all. A call whose first attempt is still running in this
// process is answered InProgress at once.
//
// The error says which of these happened (a refusal is an Outcome, with
// a nil error):
//   - leases.ErrInvalidInput: call names no operation (an empty resource
//     or key, an epoch below 1); nothing was sent.
//   - effect's error (wrapped): rolled back, record and all.
//   - leases.ErrOutcomeUnknown: the COMMIT was sent and no answer tells;
//     call Do again with the same call: the record answers Replay if it
//     committed, and runs the effect if it did not.
//   - anything else: a failure before commit, nothing committed; the same
//     call may be retried.
func (t *Table) Do(ctx context.Context, call Call, effect func(ctx context.Context, tx *sql.Tx) (Response, error)) (Result, error) {
	if effect == nil {
		return Result{}, fmt.Errorf("%w: ops: do: no effect", leases.ErrInvalidInput)
	}
	return t.run(ctx, "do", call, func(tx *sql.Tx, digest []byte) (Response, error) {
		resp, err := effect(ctx, tx)
		if err != nil {
			return Response{}, fmt.Errorf("the effect failed: %w", err)
		}
		return resp, t.insert(ctx, tx, call, digest, "done", resp)
	})
}

// Begin is Do for an effect outside the database (an email, a payment
// API): when the call is new it commits a pending record and answers
// Accepted with a Pending; do the effect then, and Complete the record
// with its answer. Otherwise Pending is nil and Result is Replay,
// Conflict, Stale or InProgress, as for Do: do nothing.
//
// A pending record that is never completed (the process died during the
// effect, Complete failed) answers InProgress to every later call with
// its key: whether the effect happened is unknown, and the record never
// lets it happen twice. Errors are Do's.
func (t *Table) Begin(ctx context.Context, call Call) (*Pending, Result, error) {
	result, err := t.run(ctx, "begin", call, func(tx *sql.Tx, digest []byte) (Response, error) {
		return Response{}, t.insert(ctx, tx, call, digest, "pending", Response{})
	})
	if err != nil || result.Outcome != leases.Accepted {
		return nil, result, err
	}
	return &Pending{table: t, call: call, digest: digest(call)}, result, nil
}

// run is Do and Begin: it admits call's epoch and looks call up in one
// transaction, and when call is new, runs fresh there and commits.
func (t *Table) run(ctx context.Context, verb string, call Call, fresh func(tx *sql.Tx, digest []byte) (Response, error)) (Result, error) {
	if err := checkCall(call); err != nil {
		return Result{}, fmt.Errorf("ops: %s: %w", verb, err)
	}
	k := opKey{call.Resource, call.Epoch, call.Key}
	if !t.running.enter(k) {
		return Result{Outcome: leases.InProgress}, nil
	}
	defer t.running.leave(k)
	sum := digest(call)
	var result Result
	err := sqltx.Run(ctx, t.db, sqltx.Options{Known: known}, func(tx *sql.Tx) (bool, error) {
		var err error
		if result, err = t.settle(ctx, tx, call, sum); err != nil || result.Outcome != leases.Accepted {
			return false, err
		}
		result.Response, err = fresh(tx, sum)
		return err == nil, err
	})
	if err != nil {
		return Result{}, fmt.Errorf("ops %s: %s %q at epoch %d, key %q: %w", t.name, verb, call.Resource, call.Epoch, call.Key, err)
	}
	return result, nil
}

// known says of a failed COMMIT whether the server's answer proves that
// it rolled the transaction back.
func known(_ context.Context, err error) error { return sqltx.RolledBack(err) }

// settle admits call's epoch in tx and decides on the operation's record:
// Accepted when there is none yet (the call is new).
func (t *Table) settle(ctx context.Context, tx *sql.Tx, call Call, sum []byte) (Result, error) {
	admitted, err := guard.Admit(t.fence, ctx, tx, call.Resource, call.Epoch)
	if err != nil {
		return Result{}, err
	}
	if admitted.Outcome == leases.Stale {
		return Result{Outcome: leases.Stale, Newest: admitted.Record.Epoch}, nil
	}
	stored, found, err := t.lookup(ctx, tx, call)
	if err != nil {
		return Result{}, err
	}
	return decide(stored, found, sum), nil
}

// record is an operation's row.
type record struct {
	digest   []byte
	state    string
	response Response
}

// decide is the record's rule for an admitted call whose request has
// the digest sum: new (Accepted), or what its stored record says.
func decide(stored record, found bool, sum []byte) Result {
	switch {
	case !found:
		return Result{Outcome: leases.Accepted}
	case !bytes.Equal(stored.digest, sum):
		return Result{Outcome: leases.Conflict}
	case stored.state != "done":
		return Result{Outcome: leases.InProgress}
	}
	return Result{Outcome: leases.Replay, Response: stored.response}
}

func (t *Table) lookup(ctx context.Context, tx *sql.Tx, call Call) (record, bool, error) {
	var r record
	var status sql.NullInt64
	var typ sql.NullString
	err := t.stmts.QueryRow(ctx, tx, t.sql.lookup, call.Resource, call.Epoch, call.Key).
		Scan(&r.digest, &r.state, &status, &typ, &r.response.Body)
	if errors.Is(err, sql.ErrNoRows) {
		return record{}, false, nil
	}
	if err != nil {
		return record{}, false, fmt.Errorf("read the record: %w", err)
	}
	r.response.Status, r.response.Type = int(status.Int64), typ.String
	return r, true, nil
}

func (t *Table) insert(ctx context.Context, tx *sql.Tx, call Call, sum []byte, state string, resp Response) error {
	var status, typ, body any
	if state == "done" {
		status, typ, body = resp.Status, resp.Type, nonNil(resp.Body)
	}
	_, err := t.stmts.Exec(ctx, tx, t.sql.insert, call.Resource, call.Epoch, call.Key, sum, state, status, typ, body, time.Now().UnixMilli())
	if err != nil {
		return fmt.Errorf("store the record: %w", err)
	}
	return nil
}

// nonNil keeps an empty body from being stored as NULL.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

func digest(call Call) []byte {
	sum := sha256.Sum256(call.Request)
	return sum[:]
}

// Pending is an operation whose record Begin committed as pending: its
// outside effect may be done now, once, and its answer recorded with
// Complete.
type Pending struct {
	table  *Table
	call   Call
	digest []byte
}

// Call is the operation.
func (p *Pending) Call() Call { return p.call }

// Complete records resp as the operation's answer: from its commit on,
// every call with the key is a Replay of resp. It does not check the
// epoch again: the effect was done, and its answer is the truth, whatever
// holder has begun since. A Complete that is repeated with the same resp
// (after an unknown outcome) returns nil; with another, or on a record
// that is not pending, an error. Its errors are Do's kinds: on
// leases.ErrOutcomeUnknown, call it again.
func (p *Pending) Complete(ctx context.Context, resp Response) error {
	if p == nil || p.table == nil {
		return fmt.Errorf("%w: ops: complete: no pending operation", leases.ErrInvalidInput)
	}
	t, c := p.table, p.call
	err := sqltx.Run(ctx, t.db, sqltx.Options{Known: known}, func(tx *sql.Tx) (bool, error) {
		changed, err := t.stmts.Exec(ctx, tx, t.sql.complete, c.Resource, c.Epoch, c.Key, p.digest, resp.Status, resp.Type, nonNil(resp.Body))
		if err != nil {
			return false, err
		}
		if n, err := changed.RowsAffected(); err != nil || n == 1 {
			return err == nil, err
		}
		stored, found, err := t.lookup(ctx, tx, c)
		if err != nil {
			return false, err
		}
		if found && stored.state == "done" && bytes.Equal(stored.digest, p.digest) && sameResponse(stored.response, resp) {
			return false, nil // completed already, with this answer
		}
		return false, errors.New("the record is not pending: it was completed with another answer, or removed")
	})
	if err != nil {
		return fmt.Errorf("ops %s: complete %q at epoch %d, key %q: %w", t.name, c.Resource, c.Epoch, c.Key, err)
	}
	return nil
}

func sameResponse(a, b Response) bool {
	return a.Status == b.Status && a.Type == b.Type && bytes.Equal(a.Body, b.Body)
}
