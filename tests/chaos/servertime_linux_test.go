package chaos_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"leases/fence"
	"leases/postgres"
	"leases/tests/chaos"
	"leases/tests/history"
)

// guardedConfig is the guarded variant's run: the PostgreSQL variant's
// workers and faults, on the path of docs/postgres.md. The stop while
// holding the lessor's write lock is SQLite's and does not apply.
func guardedConfig(t *testing.T) Config {
	cfg := config(t, fence.PostgreSQL, false)
	cfg.Guarded, cfg.PauseInLessor = true, 0
	return cfg
}

// guard makes the workers run the guarded variant. Their connections
// bound a paused holder's open transaction as docs/postgres.md says
// (idle_in_transaction_session_timeout, 5 s there): longer than any stop
// here, so that every stop between the guard and COMMIT holds the next
// grant back until the holder continues, which is the situation the
// guard is for.
func (c *controller) guard() {
	c.env.Guarded = true
	c.env.DSN += " idle_in_transaction_session_timeout=5s"
}

// serverSettings are the PostgreSQL server's settings beyond pgtest's:
// in the guarded variant, commit timestamps, from which the checks learn
// when each row committed on the server's clock.
func serverSettings(cfg Config) []string {
	if cfg.Guarded {
		return []string{"track_commit_timestamp=on"}
	}
	return nil
}

// committedAt is the expression of a business row's commit time
// (history.Row.CommittedAt) in the controller's look at the rows: the
// commit timestamp of the transaction that inserted it (xmin), in
// nanoseconds, where the server keeps them; 0 elsewhere.
func (c *controller) committedAt() string {
	if !c.cfg.Guarded {
		return "0"
	}
	return `COALESCE((extract(epoch FROM pg_catalog.pg_xact_commit_timestamp(xmin)) * 1000000000)::bigint, 0)`
}

// createLeases creates the lease store's tables in the workers' database.
func (c *controller) createLeases(ctx context.Context, db *sql.DB) {
	store, err := postgres.New(db, postgres.Options{})
	if err == nil {
		err = store.Create(ctx)
	}
	if err != nil {
		c.t.Fatal(err)
	}
}

// logGuarded reports what the guard did in the run.
func (c *controller) logGuarded(h *history.History) {
	f := h.HeldPastExpiry()
	c.t.Logf("guarded: %d tenures and transactions refused NotLive; %d admitted transactions whose holder was stopped past its lease's expiry while another worker acquired (%d of them committed, %d rolled back); %d COMMITs sent after the next epoch's grant returned, %d of them committed (late rows)",
		f.NotLive, f.Situations, f.Committed, f.Situations-f.Committed, f.SentAfterGrant, f.LateRows)
	c.t.Logf("guarded: %d COMMITs held with their backend stopped; when it continued, %d rows not yet committed while another worker was acquiring, of which the next epoch's grant had returned for %d (late rows) and returned only after the COMMIT was let go for %d",
		len(h.Held), f.HeldContended, f.HeldLate, f.HeldWaited)
	m := h.CommitMargins()
	c.t.Logf("guarded: %d rows' commit timestamps checked against their leases' ends on the server's clock, the closest %v before it; %d rows not checked (no timestamp, or an end not known)",
		m.Checked, m.Least.Round(time.Microsecond), m.Unchecked)
}

// guardedRun is what the controller keeps of the guarded variant's held
// COMMITs: the transaction whose COMMIT each stopped backend holds, and
// what it saw when it continued the backend.
type guardedRun struct {
	ops  map[int]string // by backend pid: the transaction's OpID
	db   *sql.DB        // the controller's look at the rows
	held []history.HeldCommit
	// stale are the workers in faultStaleAfterCheck, from their stop to
	// the return of their transaction; meanwhile every new holder that
	// announces its grant waits in waiting, so that the stale worker's
	// transaction comes after the next grant and before the new
	// holder's tenure: a holder paused past its expiry before the new
	// holder has acted.
	stale   map[*proc]bool
	waiting []*proc
}

// txDoneEvent: a worker's transaction returned.
type txDoneEvent struct{ p *proc }

// staleAfterCheck stops p after its Check for a fault's length, and then
// lets it go on as a holder that did not see its session end.
func (c *controller) staleAfterCheck(p *proc) {
	if c.guarded.stale == nil {
		c.guarded.stale = map[*proc]bool{}
	}
	c.guarded.stale[p] = true
	c.pause(p, faultStaleAfterCheck, chaos.AnswerStale, 0)
}

// granted answers a new holder that announced its grant: it waits while
// a stale worker has not finished its transaction.
func (c *controller) granted(p *proc) {
	if len(c.guarded.stale) == 0 {
		c.answer(p, "go")
		return
	}
	c.guarded.waiting = append(c.guarded.waiting, p)
}

// txDone lets the waiting new holders go once p, a stale worker, has
// finished its transaction (or exited).
func (c *controller) txDone(p *proc) {
	if !c.guarded.stale[p] {
		return
	}
	delete(c.guarded.stale, p)
	if len(c.guarded.stale) > 0 {
		return
	}
	for _, q := range c.guarded.waiting {
		if !q.killed && !q.exited {
			c.answer(q, "go")
		}
	}
	c.guarded.waiting = nil
}

// holdCommit notes which transaction's COMMIT the backend at.Pid is
// about to hold (the guarded variant).
func (c *controller) holdCommit(at history.Record) {
	if !c.cfg.Guarded || at.Pid == 0 {
		return
	}
	if c.guarded.ops == nil {
		c.guarded.ops = map[int]string{}
	}
	c.guarded.ops[at.Pid] = at.OpID
}

// beforeContinue looks, right before a stopped backend that holds a
// COMMIT continues, whether that transaction's row is visible yet: a row
// that is not has not committed, and commits, if at all, after this
// moment. A look that fails (the server is down) says nothing.
func (c *controller) beforeContinue(ctx context.Context, pid int) {
	opID, ok := c.guarded.ops[pid]
	if !ok || !c.backends[pid] {
		return
	}
	delete(c.guarded.ops, pid)
	if c.guarded.db == nil {
		c.guarded.db = c.open()
		c.t.Cleanup(func() { _ = c.guarded.db.Close() })
	}
	var n int
	err := c.guarded.db.QueryRowContext(ctx, `SELECT count(*) FROM chaos_rows WHERE op = $1`, opID).Scan(&n)
	if err == nil {
		c.guarded.held = append(c.guarded.held, history.HeldCommit{OpID: opID, At: time.Now().UnixNano(), Visible: n > 0})
	}
}

// faultStaleAfterCheck is the guarded variant's own fault: a stop after
// Check, longer than the TTL, after which the worker runs its
// transaction as a holder that did not see its session end
// (chaos.AnswerStale): only the guard's look at the lease on the
// server's clock can refuse it.
const faultStaleAfterCheck = "stop after Check, then the transaction under a context the session's end does not cancel"
