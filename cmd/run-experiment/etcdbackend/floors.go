package etcdbackend

import (
	"context"
	"errors"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"leases/evidence/backend"
)

var _ backend.Floored = Backend{}

// Floors implements backend.Floored, on a cluster of its own started as
// the run's is and alone: its start; a bare one-key Txn put and a bare
// linearizable Get through a client of every member, as a worker's and
// the controller's requests go; a bare Txn put through a client of the
// leader alone, as the explorer's go; and the failover scenario's own
// steps, stopping the leader until the others serve again (its election)
// and restarting it.
func (b Backend) Floors(ctx context.Context) (f backend.Floors, err error) {
	start := time.Now()
	d, end, err := backend.StartInTemp(ctx, b)
	if err != nil {
		return f, err
	}
	f.Start = time.Since(start)
	defer func() { err = errors.Join(err, end()) }()
	sb, err := d.NewSandbox(ctx, "floors")
	if err != nil {
		return f, err
	}
	defer func() { err = errors.Join(err, sb.Close()) }()
	s := sb.(*sandbox)
	leader, err := d.(*deployment).leaderClient(ctx)
	if err != nil {
		return f, err
	}
	i := 0
	put := func(client *clientv3.Client) func() error {
		return func() error {
			i++
			_, err := client.Txn(ctx).Then(clientv3.OpPut(s.prefix+"k", strconv.Itoa(i))).Commit()
			return err
		}
	}
	if f.Write, err = backend.Average(32, put(s.client)); err != nil {
		return f, err
	}
	if f.Read, err = backend.Average(32, func() error { _, err := s.client.Get(ctx, s.prefix+"k"); return err }); err != nil {
		return f, err
	}
	if f.Step, err = backend.Average(64, put(leader)); err != nil {
		return f, err
	}
	if f.Election, err = backend.Average(1, func() error { return s.StopLeader(ctx) }); err != nil {
		return f, err
	}
	f.Restart, err = backend.Average(1, func() error { return s.RestartStopped(ctx) })
	return f, err
}
