package history

import (
	"context"

	"leases"
)

// Authority is auth recording on rec every grant, renewal, release and
// holder query it passes on, with the tick its caller's clock gave it.
func Authority(auth leases.Authority, rec *Recorder) leases.Authority {
	return &recording{auth: auth, rec: rec}
}

type recording struct {
	auth leases.Authority
	rec  *Recorder
}

func (r *recording) Acquire(ctx context.Context, resource, holder string, now, ttl int64) (leases.Lease, error) {
	id := r.rec.Call(Record{Op: "acquire", Resource: resource, Holder: holder, Now: now, TTL: ttl})
	lease, err := r.auth.Acquire(ctx, resource, holder, now, ttl)
	r.rec.Return(id, LeaseReturn(lease, err))
	return lease, err
}

func (r *recording) Renew(ctx context.Context, held leases.Lease, now, ttl int64) (leases.Lease, error) {
	id := r.rec.Call(Record{Op: "renew", Resource: held.Resource, Holder: held.Holder, Epoch: held.Epoch, Now: now, TTL: ttl})
	lease, err := r.auth.Renew(ctx, held, now, ttl)
	r.rec.Return(id, LeaseReturn(lease, err))
	return lease, err
}

func (r *recording) Release(ctx context.Context, held leases.Lease, now int64) error {
	id := r.rec.Call(Record{Op: "release", Resource: held.Resource, Holder: held.Holder, Epoch: held.Epoch, Now: now})
	err := r.auth.Release(ctx, held, now)
	r.rec.Return(id, LeaseReturn(leases.Lease{}, err))
	return err
}

func (r *recording) Lease(ctx context.Context, resource string, now int64) (leases.Lease, bool, error) {
	id := r.rec.Call(Record{Op: "holder", Resource: resource, Now: now})
	lease, live, err := r.auth.Lease(ctx, resource, now)
	r.rec.Return(id, HolderReturn(lease, live, err))
	return lease, live, err
}

// Live is the authority's, unrecorded.
func (r *recording) Live(ctx context.Context, now int64, resources ...string) ([]leases.Lease, error) {
	return r.auth.Live(ctx, now, resources...)
}

func (r *recording) Changed(ctx context.Context, resource string) (<-chan struct{}, error) {
	return r.auth.Changed(ctx, resource)
}
