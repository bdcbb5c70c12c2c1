package chaos_test

import (
	"context"
	"database/sql"
	"testing"

	"leases/fence"
	"leases/postgres"
	"leases/tests/chaos"
)

// guardedConfig is the guarded variant's run: the PostgreSQL variant's
// workers and faults, on the path of docs/postgres.md. The stop while
// holding the lessor's write lock is SQLite's and does not apply.
func guardedConfig(t *testing.T) Config {
	cfg := config(t, fence.PostgreSQL)
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
func (c *controller) logGuarded(h *chaos.History) {
	f := h.HeldPastExpiry()
	c.t.Logf("guarded: %d tenures and transactions refused NotLive; %d admitted transactions whose holder was stopped past its lease's expiry while another worker acquired (%d of them committed, %d rolled back); %d COMMITs sent after the next epoch's grant returned, %d of them committed (late rows)",
		f.NotLive, f.Situations, f.Committed, f.Situations-f.Committed, f.SentAfterGrant, f.LateRows)
}
