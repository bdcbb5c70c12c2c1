package fence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"

	"leases"
	"leases/internal/guard"
	"leases/internal/rules"
)

// Tenure is a lease holder's use of the fence for one tenure (one lease,
// one epoch): its epoch observed in the table once, when the tenure
// begins, and then each of its transactions admitted by the table. It is
// the safe way to use the fence under a session: any number of
// transactions per tenure, and no transaction of an older tenure commits
// after the newer tenure has begun. Safe for concurrent use.
//
// A tenure begun by a store that keeps the leases in the same database
// (sqlite.Store.Tenure, postgres.Store.Tenure) admits a transaction only
// while the lease is also live on the store's clock, and checks it again
// when the transaction commits.
type Tenure struct {
	lease leases.Lease
	guard guard.Guard

	mu sync.Mutex
	// unresolved are the tenure's transactions whose outcome is unknown
	// and not yet resolved: while there are any, Tx refuses to begin
	// another, whose commit would move the marker that Resolve reads.
	unresolved map[*unknownCommit]bool
}

// ErrUnresolved reports a transaction that Tx did not begin because an
// earlier transaction of the tenure has an unknown outcome that Resolve
// has not yet resolved: a later commit would leave Resolve unable to
// tell. Nothing was sent; resolve the earlier one, then try again.
var ErrUnresolved = errors.New("an earlier transaction of the tenure has an unknown outcome: Resolve it first")

func init() {
	guard.Tenure = func(ctx context.Context, lease leases.Lease, g guard.Guard) (any, error) {
		return begin(ctx, lease, g)
	}
	guard.Table = func(table any, o guard.TableOptions) guard.Guard {
		return &epochGuard{table: table.(*Table), opts: o}
	}
	guard.Observe = func(table any, ctx context.Context, tx *sql.Tx, resource string, epoch int64) (leases.WriteResult, error) {
		return table.(*Table).observe(ctx, tx, resource, epoch)
	}
	guard.Admit = func(table any, ctx context.Context, tx *sql.Tx, resource string, epoch int64) (leases.WriteResult, error) {
		result, _, err := table.(*Table).admit(ctx, tx, resource, epoch)
		return result, err
	}
}

// Tenure begins the tenure of lease on its resource, in the table's
// database: it observes the lease's epoch in a transaction of its own and
// commits it, so that from then on every transaction of an older tenure
// is refused, before the new holder has written anything (this closes the
// gap for all that follows). It returns an error matching leases.ErrStale
// when a newer epoch reached the table first. Call it right after the
// lease was granted, with the session's context, before reading or
// acting. The table checks the epoch alone: where the leases are in the
// same database, the store's Tenure checks the lease too.
func (t *Table) Tenure(ctx context.Context, lease leases.Lease) (*Tenure, error) {
	t.stmts.Prepare(ctx, t.sql.all())
	return begin(ctx, lease, &epochGuard{table: t})
}

func begin(ctx context.Context, lease leases.Lease, g guard.Guard) (*Tenure, error) {
	if err := rules.CheckHeld(lease, 0); err != nil {
		return nil, fmt.Errorf("fence: begin a tenure: %w", err)
	}
	err := g.Run(ctx, nil, func(tx *sql.Tx) (bool, error) {
		return true, g.Begin(ctx, tx, lease)
	})
	if err != nil {
		return nil, fmt.Errorf("fence: begin the tenure of epoch %d on %q: %w", lease.Epoch, lease.Resource, err)
	}
	return &Tenure{lease: lease, guard: g}, nil
}

// Lease is the lease the tenure was begun with.
func (tn *Tenure) Lease() leases.Lease { return tn.lease }

// Epoch is the tenure's epoch.
func (tn *Tenure) Epoch() int64 { return tn.lease.Epoch }

// Tx runs fn in a transaction of the tenure and commits it: it begins a
// transaction on the tenure's database with ctx and opts, admits it (the
// fence row is then locked until the transaction ends), runs fn, and
// commits. Pass the session's context: a transaction whose context has
// ended before the COMMIT is sent is rolled back, not committed; one
// whose context ends while its COMMIT is on its way has an unknown
// outcome, which [Tenure.Resolve] resolves.
//
// The error says which of these happened:
//   - leases.ErrStale (a refusal): a newer epoch reached the table;
//     nothing committed, and this holder must stop. A store's tenure also
//     refuses with leases.ErrNotLive, at the admission or at the commit,
//     once the lease is no longer live on the store's clock.
//   - fn's error: rolled back, fn's error returned (wrapped).
//   - leases.ErrOutcomeUnknown: the COMMIT was sent and no answer tells
//     what became of it; it may have committed. Call Resolve with the
//     error before acting on it.
//   - anything else: a failure before commit, nothing committed; the
//     transaction may be retried while the lease lasts. When ctx has
//     ended, the error matches ctx's error and its cause (a session's
//     end: session.ErrEnded), whatever the driver said.
//
// While fn runs, the transaction holds the fence row: a holder that
// pauses there (a stopped process, a long call) holds back the next
// holder's first transaction until the database ends it. Bound it: in
// PostgreSQL with idle_in_transaction_session_timeout (or a statement
// timeout), in SQLite with the other side's busy timeout.
func (tn *Tenure) Tx(ctx context.Context, opts *sql.TxOptions, fn func(tx *sql.Tx) error) error {
	tn.mu.Lock()
	unresolved := len(tn.unresolved)
	tn.mu.Unlock()
	if unresolved > 0 {
		return fmt.Errorf("fence: transaction of epoch %d on %q: %w (%d of them)", tn.lease.Epoch, tn.lease.Resource, ErrUnresolved, unresolved)
	}
	var m guard.Marker
	err := tn.guard.Run(ctx, opts, func(tx *sql.Tx) (bool, error) {
		var err error
		if m, err = tn.guard.Admit(ctx, tx, tn.lease); err != nil {
			return false, err
		}
		if err := fn(tx); err != nil {
			return false, err
		}
		return true, nil
	})
	if err == nil {
		return nil
	}
	if errors.Is(err, leases.ErrOutcomeUnknown) {
		u := &unknownCommit{tenure: tn, marker: m, err: err}
		tn.mu.Lock()
		if tn.unresolved == nil {
			tn.unresolved = map[*unknownCommit]bool{}
		}
		tn.unresolved[u] = true
		tn.mu.Unlock()
		err = u
	}
	return fmt.Errorf("fence: transaction of epoch %d on %q: %w", tn.lease.Epoch, tn.lease.Resource, err)
}

// Resolve says what became of the transaction whose Tx returned txErr, an
// unknown outcome (leases.ErrOutcomeUnknown): committed, or not. It never
// answers "not committed" while that transaction can still commit: it
// reads the marker the transaction's admit left in the fence row (the
// row's count of admitted transactions, and a tag of its own) once the
// transaction can no longer commit: on PostgreSQL under a share lock of
// the row, which waits for the transaction while the server still has it
// (its connection died during the COMMIT, and the backend is still at
// it); on SQLite under the write lock, on a connection of its own, and it
// makes a "not committed" final by rewriting the row, so that a commit
// that was never indexed cannot be recovered into the file later.
//
// While a transaction's outcome is unresolved, Tx refuses to begin
// another of the tenure (ErrUnresolved), whose commit would move the
// marker. Pass a context with a bound: Resolve waits until ctx ends at
// most. The error matches leases.ErrOutcomeUnknown when the outcome still
// cannot be told: ctx ended first, or the database could not be read (try
// again); or the row no longer tells, because another transaction of the
// tenure, already under way, committed after it, or two newer tenures
// have begun since (final: Tx goes on). A txErr that is not an unknown
// outcome of this tenure's Tx is invalid input.
func (tn *Tenure) Resolve(ctx context.Context, txErr error) (committed bool, err error) {
	var u *unknownCommit
	if !errors.As(txErr, &u) || u.tenure != tn {
		return false, fmt.Errorf("%w: fence: resolve: %v is not an unknown outcome of this tenure's Tx", leases.ErrInvalidInput, txErr)
	}
	committed, err = tn.guard.Resolve(ctx, tn.lease, u.marker)
	if err == nil || errors.Is(err, errRowMoved) {
		// Answered, or never to be: the row no longer tells.
		tn.mu.Lock()
		delete(tn.unresolved, u)
		tn.mu.Unlock()
	}
	if err != nil {
		if !errors.Is(err, leases.ErrOutcomeUnknown) {
			err = fmt.Errorf("%w: %w", leases.ErrOutcomeUnknown, err)
		}
		return false, fmt.Errorf("fence: resolve the transaction of epoch %d on %q: still unknown: %w",
			tn.lease.Epoch, tn.lease.Resource, err)
	}
	return committed, nil
}

// unknownCommit is an unknown outcome of a tenure's Tx, with what Resolve
// needs to find out what became of it.
type unknownCommit struct {
	tenure *Tenure
	marker guard.Marker
	err    error
}

func (u *unknownCommit) Error() string { return u.err.Error() }
func (u *unknownCommit) Unwrap() error { return u.err }

// superseded is the refusal of a tenure's call by a table at a newer
// epoch.
func superseded(result leases.WriteResult, epoch int64) error {
	if result.Outcome == leases.Stale {
		return fmt.Errorf("%w: superseded by epoch %d (this tenure's epoch is %d)", leases.ErrStale, result.Record.Epoch, epoch)
	}
	return nil
}
