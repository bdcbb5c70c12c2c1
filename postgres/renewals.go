package postgres

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"leases"
	"leases/internal/batch"
	"leases/internal/outcome"
	"leases/internal/rules"
)

// A store's renewals go in batches (group commit, package
// internal/batch): the renewals that wait together are decided in one
// transaction of four statements whatever their number: BEGIN, one
// locking read of all their rows with the server's clock read after each
// row's lock, one UPDATE of the renewed rows from arrays, COMMIT. Each
// renewal is decided by rules.Renew on its own row, so one refused does
// not refuse the others; a COMMIT whose outcome is unknown is unknown
// for every renewal it carried.
//
// A renewal joins only a batch taken after the call began: its row's
// clock is then read after the holder sent its request, so that the
// expiry the server writes is never earlier than the one the holder
// counts. A renewal whose resource has no row yet (a first grant still
// committing, see awaitFirstRow) is decided alone, as before batching.

const (
	// lockRenewalsTemplate locks the rows of $1 (a text array) in the
	// order of their names, so that two batches never wait for each other
	// in a cycle, and reads the clock in the outer row, after each lock.
	lockRenewalsTemplate = `SELECT lease.resource, lease.epoch, lease.holder, lease.granted_at, lease.expires_at, lease.last_tick, ` + serverClock + `
	FROM (SELECT resource, epoch, holder, granted_at, expires_at, last_tick FROM "{authority}"
		WHERE resource = ANY($1::text[]) ORDER BY resource ` + lockRenew + `) AS lease`
	// renewTemplate writes what rules.Renew changes (the expiry and the
	// last tick) to every renewed row at once.
	renewTemplate = `UPDATE "{authority}" AS lease SET expires_at = renewed.expires_at, last_tick = renewed.last_tick
	FROM unnest($1::text[], $2::bigint[], $3::bigint[]) AS renewed (resource, expires_at, last_tick)
	WHERE lease.resource = renewed.resource`
)

// renewal is one call of Renew; renewedLease its answer.
type renewal struct {
	ctx   context.Context // its values (a test's step hook) go with the batch; its end does not
	held  leases.Lease
	ticks int64
}

type renewedLease struct {
	lease leases.Lease
	err   error
	alone bool // its resource has no row: decided alone
}

func newRenewals(s *Store) *batch.Group[renewal, renewedLease] {
	return &batch.Group[renewal, renewedLease]{Send: s.renewBatch}
}

// renew is Renew's decision, in the next batch.
func (s *Store) renew(ctx context.Context, held leases.Lease, ticks int64) (leases.Lease, error) {
	a, err := s.renewals.Do(ctx, renewal{ctx, held, ticks})
	if err != nil { // the batch may have committed, or not
		return leases.Lease{}, outcome.Unknown(ctx, err)
	}
	return a.lease, a.err
}

// renewBatch decides reqs in one transaction, each on its own row.
func (s *Store) renewBatch(reqs []renewal) []renewedLease {
	ctx, cancel := batchContext(reqs)
	defer cancel()
	out := make([]renewedLease, len(reqs))
	err := s.inTx(ctx, func(tx *sql.Tx) (bool, error) {
		clear(out)
		rows, err := s.lockRenewals(ctx, tx, reqs)
		if err != nil {
			return false, err
		}
		renewed := map[string]int{} // resource -> index in writes: a resource renewed twice is written once
		var writes []lockedRow
		for i, r := range reqs {
			locked, found := rows[r.held.Resource]
			if !found {
				out[i].alone = true
				continue
			}
			now := rules.NotBefore(locked.row, true, locked.clock)
			if out[i].err = rules.CheckTTL(now, r.ticks); out[i].err != nil {
				continue
			}
			var next rules.LeaseRow
			if next, out[i].lease, out[i].err = rules.Renew(locked.row, true, r.held, now, r.ticks); out[i].err != nil {
				continue
			}
			out[i].lease.Ticks = leases.ServerMillis
			locked.row = next
			rows[r.held.Resource] = locked // a later renewal of it in this batch decides on this one
			if j, ok := renewed[r.held.Resource]; ok {
				writes[j] = locked
			} else {
				renewed[r.held.Resource] = len(writes)
				writes = append(writes, locked)
			}
		}
		if len(writes) == 0 {
			return false, nil
		}
		return true, s.putRenewals(ctx, tx, writes)
	})
	for i, r := range reqs {
		switch {
		case out[i].alone:
			out[i].lease, out[i].err = s.renewAlone(ctx, r.held, r.ticks)
		case err != nil && out[i].err == nil: // renewed, but not committed, or not known to be
			out[i] = renewedLease{err: err}
		}
	}
	return out
}

// lockedRow is a row of a batch, locked, and the clock read after its lock.
type lockedRow struct {
	resource string
	row      rules.LeaseRow
	clock    int64
}

// lockRenewals locks and reads the rows of reqs' resources, by resource.
func (s *Store) lockRenewals(ctx context.Context, tx *sql.Tx, reqs []renewal) (map[string]lockedRow, error) {
	names := make([]string, len(reqs))
	for i, r := range reqs {
		names[i] = r.held.Resource
	}
	step(ctx, "lock")
	result, err := tx.QueryContext(ctx, strings.ReplaceAll(lockRenewalsTemplate, "{authority}", s.names.authority), textArray(names))
	if err != nil {
		return nil, fmt.Errorf("read the leases: %w", err)
	}
	defer result.Close()
	rows := map[string]lockedRow{}
	for result.Next() {
		var l lockedRow
		var holder sql.NullString
		if err := result.Scan(&l.resource, &l.row.Epoch, &holder, &l.row.GrantedAt, &l.row.ExpiresAt, &l.row.LastTick, &l.clock); err != nil {
			return nil, fmt.Errorf("read the leases: %w", err)
		}
		l.row.Holder, l.row.Held = holder.String, holder.Valid
		rows[l.resource] = l
	}
	if err := result.Err(); err != nil {
		return nil, fmt.Errorf("read the leases: %w", err)
	}
	return rows, nil
}

// putRenewals writes the renewed rows with one statement.
func (s *Store) putRenewals(ctx context.Context, tx *sql.Tx, writes []lockedRow) error {
	names, expires, ticks := make([]string, len(writes)), make([]int64, len(writes)), make([]int64, len(writes))
	for i, w := range writes {
		names[i], expires[i], ticks[i] = w.resource, w.row.ExpiresAt, w.row.LastTick
	}
	step(ctx, "write")
	result, err := tx.ExecContext(ctx, strings.ReplaceAll(renewTemplate, "{authority}", s.names.authority),
		textArray(names), intArray(expires), intArray(ticks))
	if err != nil {
		return fmt.Errorf("write the leases: %w", err)
	}
	if n, err := result.RowsAffected(); err != nil || n != int64(len(writes)) {
		return fmt.Errorf("write the leases: %d rows written, not %d (%v): a row was deleted, or the table is not this schema", n, len(writes), err)
	}
	return nil
}

// textArray is names as a PostgreSQL array literal, which every driver
// passes as text: database/sql has no array type.
func textArray(names []string) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, n := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('"')
		b.WriteString(strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(n))
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}

func intArray(values []int64) string {
	parts := make([]string, len(values))
	for i, v := range values {
		parts[i] = strconv.FormatInt(v, 10)
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// batchContext is the context of a batch: the first call's values (a
// test's step hook), ended once every call's context has ended, when
// nobody waits for the batch any more. A batch that waits on a lock or a
// connection holds back the next one, so it must not outlive its
// callers.
func batchContext(reqs []renewal) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(reqs[0].ctx))
	var mu sync.Mutex
	left := len(reqs)
	stops := make([]func() bool, len(reqs))
	for i, r := range reqs {
		stops[i] = context.AfterFunc(r.ctx, func() {
			mu.Lock()
			defer mu.Unlock()
			if left--; left == 0 {
				cancel(context.Cause(r.ctx))
			}
		})
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel(context.Canceled)
	}
}
