package sqlitestore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"

	"modernc.org/sqlite"

	"leases"
	"leases/fence"
	"leases/internal/guard"
	"leases/internal/rules"
)

// tenuresTable is the fence of the store's tenures, in the leases file.
const tenuresTable = "tenure_fence"

// TenureFence is the fence table of the store's tenures, for tests.
func (s *Store) TenureFence() *fence.Table { return s.tenures }

// commitCheck is a tenure's lease as its transaction must still hold it
// at the commit: live until expires on the clock now.
type commitCheck struct {
	lease   leases.Lease
	expires int64
	now     func() int64
	at      int64 // the tick at which the commit was refused
}

// hooked is the store's connector: every connection it opens runs
// atCommit before each commit, and clears the check at each rollback.
type hooked struct {
	driver.Connector
	store *Store
}

func (h hooked) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := h.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	hooks, ok := conn.(sqlite.HookRegisterer)
	if !ok {
		return nil, errors.Join(errors.New("the sqlite driver's connection has no commit hook"), conn.Close())
	}
	hooks.RegisterCommitHook(h.store.atCommit)
	hooks.RegisterRollbackHook(func() { h.store.check.Store(nil) })
	return conn, nil
}

// atCommit is SQLite's commit hook: it runs inside the COMMIT, after every
// statement of the transaction and before SQLite writes the commit to the
// log, on the goroutine that sent the COMMIT. When a tenure's transaction
// commits after its lease's expiry on the store's clock (its process was
// stopped between its statements and its COMMIT, say), it answers 1,
// which makes SQLite roll the transaction back instead: nothing commits
// after the lease's expiry. The transaction holds the file's write lock
// throughout, so no grant can come between the check and the commit; what
// remains is the instant between the check and SQLite's write of the
// commit, on this process's own clock.
func (s *Store) atCommit() int32 {
	c := s.check.Swap(nil)
	if c == nil {
		return 0
	}
	if now := c.now(); now >= c.expires {
		refused := *c
		refused.at = now
		s.vetoed.Store(&refused)
		return 1
	}
	return 0
}

// refusedAtCommit is the refusal of a COMMIT that atCommit refused, or
// nil when it refused none.
func (s *Store) refusedAtCommit(err error) error {
	c := s.vetoed.Swap(nil)
	if c == nil {
		return nil
	}
	return fmt.Errorf("%w (%w) at the commit, nothing committed: epoch %d of %q expired at tick %d, %d ms before the commit: %w",
		leases.ErrNotLive, leases.ErrLeaseExpired, c.lease.Epoch, c.lease.Resource, c.expires, c.at-c.expires, err)
}

// Tenure begins the tenure of lease in the store's file, for the user's
// own transactions there, on the clock now (package leases/sqlite's
// Store.Tenure documents it).
func (s *Store) Tenure(ctx context.Context, lease leases.Lease, now func() int64) (*fence.Tenure, error) {
	base := guard.Table(s.tenures, guard.TableOptions{Runner: s.run, ResolveOn: s.fresh})
	t, err := guard.Tenure(ctx, lease, &liveGuard{store: s, base: base, tick: rules.Clock(now), now: now})
	if err != nil {
		return nil, err
	}
	return t.(*fence.Tenure), nil
}

// liveGuard is the guard of a store's tenures: the lease live on the
// store's clock when the transaction is admitted and when it commits,
// then the epoch at the tenures' fence.
type liveGuard struct {
	store *Store
	base  guard.Guard
	tick  rules.TickFunc
	now   func() int64
}

var _ guard.Guard = (*liveGuard)(nil)

func (g *liveGuard) Run(ctx context.Context, opts *sql.TxOptions, fn func(tx *sql.Tx) (bool, error)) error {
	return g.base.Run(ctx, opts, fn)
}

func (g *liveGuard) Begin(ctx context.Context, tx *sql.Tx, lease leases.Lease) error {
	if err := g.live(ctx, tx, lease); err != nil {
		return err
	}
	return g.base.Begin(ctx, tx, lease)
}

func (g *liveGuard) Admit(ctx context.Context, tx *sql.Tx, lease leases.Lease) (guard.Marker, error) {
	if err := g.live(ctx, tx, lease); err != nil {
		return guard.Marker{}, err
	}
	return g.base.Admit(ctx, tx, lease)
}

func (g *liveGuard) Resolve(ctx context.Context, lease leases.Lease, m guard.Marker) (bool, error) {
	return g.base.Resolve(ctx, lease, m)
}

// live refuses with leases.ErrNotLive unless lease is the live lease on
// the rows tx sees, at the store's clock; when it is, the commit of tx is
// checked again (atCommit).
func (g *liveGuard) live(ctx context.Context, tx *sql.Tx, lease leases.Lease) error {
	row, found, err := g.store.Authority().read(ctx, tx, lease.Resource)
	if err != nil {
		return err
	}
	now, err := g.tick(row, found, 0)
	if err != nil {
		return err
	}
	live, err := rules.LiveFor(row, found, lease, now)
	switch {
	case err != nil:
		return err
	case !live:
		return rules.NotLive(row, found, lease, now)
	}
	g.store.check.Store(&commitCheck{lease: lease, expires: row.ExpiresAt, now: g.now})
	return nil
}

// fresh opens the store's file on a connection of its own, for Resolve:
// after a commit whose outcome is unknown, the store's own connection may
// see the file otherwise than the file is.
func (s *Store) fresh(context.Context) (*sql.DB, func() error, error) {
	if s.path == memory {
		return s.db, func() error { return nil }, nil
	}
	db, err := sql.Open("sqlite", s.dsn)
	if err != nil {
		return nil, nil, err
	}
	db.SetMaxOpenConns(1)
	return db, db.Close, nil
}
