package postgres

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"leases"
	"leases/internal/batch"
	"leases/internal/outcome"
	"leases/internal/rules"
	"leases/internal/sqltx"
)

// A store's renewals go in batches (group commit, package
// internal/batch), and a batch is one statement (renewTemplate),
// committed on its own: it locks the rows of all its renewals, reads the
// server's clock after each row's lock, and renews the rows that
// rules.Renew renews; every locked row comes back as it was locked, with
// its tick, and rules.Renew decides again in Go on the same row and tick,
// to answer each renewal, a refusal with its reason (expired, not the
// holder). One refused does not refuse the others. A statement whose
// outcome is unknown (sent, no answer) is unknown for every renewal in it.
//
// Left to a transaction of four statements, as before (renewInTx): a
// renewal of a resource renewed already in the batch (decided after it),
// one whose resource has no row yet (a first grant still committing, see
// awaitFirstRow: then decided alone), any the statement refused where
// the rules would renew (none: the statement and the rules say the
// same), and every batch of a store whose isolation is set to repeatable
// read or serializable (a statement on its own runs at the server's
// default).
//
// A renewal joins only a batch taken after the call began: its row's
// clock is then read after the holder sent its request, so that the
// expiry the server writes is never earlier than the one the holder
// counts.

const (
	// renewTemplate decides a batch's renewals in one statement: $1 to $4
	// are their resources (each once), holders, epochs and times-to-live.
	// decided locks their rows in the order of their names, so that two
	// batches never wait for each other in a cycle, and reads the clock
	// in the outer row, after each lock, never earlier than the row's
	// last change (rules.NotBefore). renewed writes what rules.Renew
	// writes to the rows it renews: held by the renewal's holder at its
	// epoch, live at the tick, an expiry that does not overflow
	// (rules.CheckTTL). The rows come back as they were locked.
	renewTemplate = `WITH decided AS MATERIALIZED (
	SELECT lease.resource, lease.epoch, lease.holder, lease.granted_at, lease.expires_at, lease.last_tick,
		greatest(` + serverClock + `, lease.last_tick) AS now,
		renewal.holder AS renewal_holder, renewal.epoch AS renewal_epoch, renewal.ttl
	FROM (SELECT resource, epoch, holder, granted_at, expires_at, last_tick FROM "{authority}"
		WHERE resource = ANY($1::text[]) ORDER BY resource ` + lockRenew + `) AS lease
	JOIN unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[]) AS renewal (resource, holder, epoch, ttl)
		ON renewal.resource = lease.resource
), renewed AS (
	UPDATE "{authority}" AS lease SET expires_at = greatest(d.expires_at, d.now + d.ttl), last_tick = d.now
	FROM decided AS d
	WHERE lease.resource = d.resource AND d.holder = d.renewal_holder AND d.epoch = d.renewal_epoch
		AND d.now < d.expires_at AND d.ttl <= 9223372036854775807 - d.now
	RETURNING lease.resource
)
SELECT d.resource, d.epoch, d.holder, d.granted_at, d.expires_at, d.last_tick, d.now, renewed.resource IS NOT NULL
FROM decided AS d LEFT JOIN renewed ON renewed.resource = d.resource`
	// lockRenewalsTemplate locks the rows of $1 (a text array) in the
	// order of their names, and reads the clock in the outer row, after
	// each lock: renewInTx's read.
	lockRenewalsTemplate = `SELECT lease.resource, lease.epoch, lease.holder, lease.granted_at, lease.expires_at, lease.last_tick, ` + serverClock + `
	FROM (SELECT resource, epoch, holder, granted_at, expires_at, last_tick FROM "{authority}"
		WHERE resource = ANY($1::text[]) ORDER BY resource ` + lockRenew + `) AS lease`
	// putRenewalsTemplate writes what rules.Renew changes (the expiry and
	// the last tick) to every row renewInTx renewed at once.
	putRenewalsTemplate = `UPDATE "{authority}" AS lease SET expires_at = renewed.expires_at, last_tick = renewed.last_tick
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

// renewBatch decides reqs, each on its own row: in one statement, and
// those it leaves in one transaction after it.
func (s *Store) renewBatch(reqs []renewal) []renewedLease {
	ctx, cancel := batchContext(reqs)
	defer cancel()
	if s.isolation != sql.LevelDefault && s.isolation != sql.LevelReadCommitted {
		return s.renewInTx(ctx, reqs)
	}
	out, again := s.renewInOne(ctx, reqs)
	if len(again) > 0 {
		left := make([]renewal, len(again))
		for j, i := range again {
			left[j] = reqs[i]
		}
		for j, a := range s.renewInTx(ctx, left) {
			out[again[j]] = a
		}
	}
	return out
}

// renewInOne decides the first renewal of each resource of reqs with
// one statement (renewTemplate); again are the renewals it leaves to a
// transaction: a resource's later ones, and those whose row it did not
// find or whose refusal the rules do not make.
func (s *Store) renewInOne(ctx context.Context, reqs []renewal) (out []renewedLease, again []int) {
	out = make([]renewedLease, len(reqs))
	first := map[string]int{} // resource -> its renewal in the statement
	var names, holders []string
	var epochs, ttls []int64
	for i, r := range reqs {
		if _, ok := first[r.held.Resource]; ok {
			again = append(again, i)
			continue
		}
		first[r.held.Resource] = i
		names, holders = append(names, r.held.Resource), append(holders, r.held.Holder)
		epochs, ttls = append(epochs, r.held.Epoch), append(ttls, r.ticks)
	}
	rows, err := s.renewStatement(ctx, textArray(names), textArray(holders), intArray(epochs), intArray(ttls))
	for _, i := range first {
		r := reqs[i]
		locked, found := rows[r.held.Resource]
		switch {
		case err != nil:
			out[i].err = err
		case !found:
			again = append(again, i)
		default:
			var undecided bool
			if out[i], undecided = decided(ctx, locked, r); undecided {
				again = append(again, i)
			}
		}
	}
	slices.Sort(again)
	return out, again
}

// decided is the answer to r of the statement that locked its row as
// locked and renewed it or not: rules.Renew's, on the same row and tick.
// A refusal that the rules do not make (none) is left undecided, for a
// transaction to decide; a renewal that the rules refuse (none either)
// is an error whose outcome is unknown: the row was written.
func decided(ctx context.Context, locked renewedRow, r renewal) (a renewedLease, undecided bool) {
	now := rules.NotBefore(locked.row, true, locked.clock)
	err := rules.CheckTTL(now, r.ticks)
	if err == nil {
		_, a.lease, err = rules.Renew(locked.row, true, r.held, now, r.ticks)
	}
	switch {
	case locked.renewed && err != nil:
		return renewedLease{err: outcome.Unknown(ctx, fmt.Errorf("the renewal statement renewed what the rules refuse (%v)", err))}, false
	case locked.renewed:
		a.lease.Ticks = leases.ServerMillis
		return a, false
	case err == nil:
		return renewedLease{}, true
	}
	return renewedLease{err: err}, false
}

// renewedRow is a row of renewTemplate: as it was locked, the tick of its
// decision, and whether the statement renewed it.
type renewedRow struct {
	lockedRow
	renewed bool
}

// renewStatement runs renewTemplate on its own (autocommit), tried again
// after a serialization failure or a deadlock (nothing committed), up to
// the store's Retries. Its error says, as inTx's does, whether nothing
// committed or the outcome is unknown.
func (s *Store) renewStatement(ctx context.Context, args ...any) (map[string]renewedRow, error) {
	query := strings.ReplaceAll(renewTemplate, "{authority}", s.names.authority)
	for failed := 0; ; failed++ {
		step(ctx, "commit") // the statement commits
		if ctx.Err() != nil {
			return nil, outcome.BeforeCommit(ctx, fmt.Errorf("renew: %w", sqltx.ErrNotCommitted))
		}
		rows, err := s.runRenewStatement(ctx, query, args)
		switch rolledBack := sqltx.RolledBack(err); {
		case err == nil:
			return rows, nil
		case rolledBack != nil && failed < s.retries && ctx.Err() == nil:
			continue
		case rolledBack != nil:
			return nil, outcome.BeforeCommit(ctx, fmt.Errorf("renew, tried %d times: %w", failed+1, rolledBack))
		default:
			return nil, outcome.Unknown(ctx, fmt.Errorf("renew: %w", err))
		}
	}
}

// runRenewStatement sends renewTemplate once and reads its rows.
func (s *Store) runRenewStatement(ctx context.Context, query string, args []any) (map[string]renewedRow, error) {
	result, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer result.Close()
	rows := map[string]renewedRow{}
	for result.Next() {
		var r renewedRow
		var holder sql.NullString
		if err := result.Scan(&r.resource, &r.row.Epoch, &holder, &r.row.GrantedAt, &r.row.ExpiresAt, &r.row.LastTick, &r.clock, &r.renewed); err != nil {
			return nil, err
		}
		r.row.Holder, r.row.Held = holder.String, holder.Valid
		rows[r.resource] = r
	}
	return rows, result.Err()
}

// renewInTx decides reqs in one transaction of four statements, each on
// its own row.
func (s *Store) renewInTx(ctx context.Context, reqs []renewal) []renewedLease {
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
	result, err := tx.ExecContext(ctx, strings.ReplaceAll(putRenewalsTemplate, "{authority}", s.names.authority),
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
