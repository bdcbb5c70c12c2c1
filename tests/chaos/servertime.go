package chaos

import (
	"context"
	"database/sql"
	"time"

	"leases"
	"leases/clock"
	"leases/fence"
	"leases/postgres"
	"leases/session"
	"leases/tests/history"
)

// The guarded variant runs the path docs/postgres.md gives a team with
// only PostgreSQL: the leases in the same database as the business rows,
// on the server's clock (store.Lessor(): no caller says what time it
// is), sessions on that lessor, and every business transaction admitted
// by the store's Tenure, so that it commits only while the lease is live
// on the server's clock (checked again at the commit) and its epoch is the
// newest at the fence (the store's fence table, leases_fence, which is
// fence.DefaultTable).

// runGuarded is run's loop for the guarded variant. The lessor has a
// connection pool of its own, without the COMMIT announcements of db's
// connection (only a tenure's COMMIT is held by the controller), so that
// the session's renewals do not queue behind the worker's transaction.
func (w *worker) runGuarded(ctx context.Context, db *sql.DB, fences *fence.Table) error {
	leasesDB, err := sql.Open("pgx", w.cfg.DSN)
	if err != nil {
		return err
	}
	defer leasesDB.Close()
	store, err := postgres.New(leasesDB, postgres.Options{})
	if err != nil {
		return err
	}
	w.live = store.Lessor()
	// The tenures' transactions run on db, whose COMMITs the controller
	// holds: a second handle on the same tables.
	if w.tenures, err = postgres.New(db, postgres.Options{}); err != nil {
		return err
	}
	lessor := &serverRecorder{lessor: w.live, w: w}
	for ctx.Err() == nil {
		if err := w.job(ctx, lessor, db, fences, w.cfg.Resources[w.rng.IntN(len(w.cfg.Resources))]); err != nil {
			// The database failed (a server that is down): back off, as a
			// service would, on a timer of the product. A PostgreSQL store
			// goes on after an unknown outcome: nothing to open again.
			_ = clock.Wall{}.Wait(ctx, clock.Wall{}.Now()+w.cfg.TTL.Milliseconds()/2)
		}
	}
	return nil
}

// AnswerStale is the controller's answer to "checked" that makes the
// worker go on as a holder that does not see its session's end: its
// next transaction runs under a context that the session's end does not
// cancel (a holder whose transaction was begun without the session's
// context, or whose own timer was held up), so that only the server's
// clock can refuse it. It is given after a stop longer than the TTL.
const AnswerStale = "stale"

// txContext is the context of the transaction the worker runs next: the
// tenure's, or after AnswerStale one that the session's end leaves
// alone.
func (w *worker) txContext(ctx context.Context) context.Context {
	if w.lastAnswer.Load() == AnswerStale {
		return context.WithoutCancel(ctx)
	}
	return ctx
}

// tenure is what a worker's transactions run in: a fence.Tenure, of the
// fence alone or, in the guarded variant, of the store.
type tenure interface {
	Tx(ctx context.Context, opts *sql.TxOptions, fn func(tx *sql.Tx) error) error
	Resolve(ctx context.Context, txErr error) (committed bool, err error)
}

// beginTenure begins the tenure of s's lease on resource: fence.Tenure
// ("the newest tenure"), or in the guarded variant the store's ("live on
// the server's clock, and the newest tenure").
func (w *worker) beginTenure(ctx context.Context, s *session.Session, db *sql.DB, fences *fence.Table, resource string) (tenure, error) {
	if w.live == nil {
		t, err := fences.Tenure(ctx, s.Lease())
		if err != nil {
			return nil, err
		}
		return t, nil
	}
	// Granted, the tenure not begun: where the controller holds a new
	// holder back while a stale one goes on (see the controller).
	if !w.announce(history.Record{Kind: "at", Point: "granted", Resource: resource, Epoch: s.Epoch()}) {
		return nil, errStop
	}
	t, err := w.tenures.Tenure(ctx, s.Lease())
	if err != nil {
		return nil, err
	}
	return t, nil
}

// serverRecorder is a lessor on the server's clock that records every
// call it passes on, as recorder does for an authority: with Now unknown
// (ServerTime), the time-to-live in ticks, and the lease the server
// answered with, whose ticks are the server's.
type serverRecorder struct {
	lessor leases.Lessor
	w      *worker
}

var _ leases.Lessor = (*serverRecorder)(nil)

func (r *serverRecorder) Acquire(ctx context.Context, resource, holder string, ttl time.Duration) (leases.Lease, error) {
	id := r.w.call(history.Record{Op: "acquire", Resource: resource, Holder: holder, TTL: ttl.Milliseconds(), ServerTime: true})
	lease, err := r.lessor.Acquire(ctx, resource, holder, ttl)
	r.w.ret(id, history.LeaseReturn(lease, err))
	return lease, err
}

func (r *serverRecorder) Renew(ctx context.Context, held leases.Lease, ttl time.Duration) (leases.Lease, error) {
	id := r.w.call(history.Record{Op: "renew", Resource: held.Resource, Holder: held.Holder, Epoch: held.Epoch,
		TTL: ttl.Milliseconds(), ServerTime: true})
	lease, err := r.lessor.Renew(ctx, held, ttl)
	r.w.ret(id, history.LeaseReturn(lease, err))
	return lease, err
}

func (r *serverRecorder) Release(ctx context.Context, held leases.Lease) error {
	id := r.w.call(history.Record{Op: "release", Resource: held.Resource, Holder: held.Holder, Epoch: held.Epoch, ServerTime: true})
	err := r.lessor.Release(ctx, held)
	r.w.ret(id, history.LeaseReturn(leases.Lease{}, err))
	return err
}

func (r *serverRecorder) Lease(ctx context.Context, resource string) (leases.Lease, bool, error) {
	id := r.w.call(history.Record{Op: "holder", Resource: resource, ServerTime: true})
	lease, live, err := r.lessor.Lease(ctx, resource)
	r.w.ret(id, history.HolderReturn(lease, live, err))
	return lease, live, err
}

// Live is the lessor's, unrecorded: the workers never list.
func (r *serverRecorder) Live(ctx context.Context, resources ...string) ([]leases.Lease, int64, error) {
	return r.lessor.Live(ctx, resources...)
}

func (r *serverRecorder) Changed(ctx context.Context, resource string) (<-chan struct{}, error) {
	return r.lessor.Changed(ctx, resource)
}
