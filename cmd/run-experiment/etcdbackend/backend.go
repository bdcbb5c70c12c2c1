// Package etcdbackend is the etcd backend of the project's evidence (the
// scenarios, the explorer and the command run-experiment): a cluster of
// three members started for the run, a key prefix of its own for each
// scenario, and stores opened on it by the controller and by every worker
// process. It lives in the command's module, which requires the cluster it
// starts (module leases/etcdcluster), so that module leases/etcd requires
// only etcd's client.
//
// Part of the evidence (what cmd/run-experiment reruns), not of the
// library: no API promise.
package etcdbackend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"leases/etcd"
	"leases/etcdcluster"
	"leases/evidence/backend"
)

// Backend is the etcd backend of the project's evidence (the scenarios,
// the explorer and the command): the controller starts a cluster of three
// member processes, each scenario gets a key prefix of its own on it, and
// every worker process connects as a client of all three members. The
// zero value is the command's.
type Backend struct {
	// Wrap, when set, puts words in front of member i's command (strace,
	// to make its system calls fail): see etcdcluster.Options.
	Wrap func(member int) []string
}

var _ backend.Driver = Backend{}

// Members is how many members the evidence's cluster has.
const Members = 3

// Name implements backend.Driver.
func (Backend) Name() string { return "etcd" }

// address is what a worker needs to open a store on a sandbox.
type address struct {
	Endpoints []string `json:"endpoints"`
	Prefix    string   `json:"prefix"`
}

// Open implements backend.Driver: a client of every endpoint in address, and
// the store on the address's prefix. Closing the store closes the client.
func (Backend) Open(ctx context.Context, specText string) (backend.Store, error) {
	var s address
	if err := json.Unmarshal([]byte(specText), &s); err != nil {
		return nil, fmt.Errorf("etcd sandbox %q: %w", specText, err)
	}
	client, err := clientv3.New(clientv3.Config{Endpoints: s.Endpoints, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("etcd client of %v: %w", s.Endpoints, err)
	}
	return newClientStore(client, s.Prefix), nil
}

// Start implements backend.Driver: a cluster of Members members. Its data
// goes in a directory of the cluster's own under os.TempDir(), not in
// dir: there the next run's Start finds it, and removes it, if this run
// is killed (etcdcluster.Sweep).
func (b Backend) Start(ctx context.Context, dir string) (backend.Deployment, error) {
	c, err := etcdcluster.Start(ctx, etcdcluster.Options{Members: Members, Wrap: b.Wrap})
	if err != nil {
		return nil, err
	}
	client, err := c.Client(ctx)
	if err != nil {
		return nil, errors.Join(err, c.Close())
	}
	return &deployment{cluster: c, client: client}, nil
}

// clientStore is a store that owns its client.
type clientStore struct {
	*etcd.Store
	client *clientv3.Client
}

// callBound bounds each call of the evidence's stores: the command's own
// bound for a hung run (command.DefaultTimeout), not imported, so that
// this package needs nothing of the command's.
const callBound = 10 * time.Minute

// newClientStore is a store on client under prefix, closing client when
// it closes. Its calls are bounded by callBound, not
// etcd.DefaultCallTimeout: on a loaded machine a healthy call can take
// longer than a second (the whole run took 28 s at load 10), and a call
// cut there would be an unknown outcome in the middle of a scenario,
// which then shows a step it does not mean to. What ends a hung run is
// the run's own timeout.
func newClientStore(client *clientv3.Client, prefix string) clientStore {
	return clientStore{etcd.New(client, etcd.Options{Prefix: prefix, CallTimeout: callBound}), client}
}

func (s clientStore) Close() error { return s.client.Close() }

// heldStore is a store on a client that others use too: its Close leaves
// the client open.
type heldStore struct{ *etcd.Store }

func (heldStore) Close() error { return nil }

// deployment is the cluster of one run. Every sandbox is a prefix of its own;
// the explorer's stores too.
type deployment struct {
	cluster *etcdcluster.Cluster
	// client is the controller's, of every member, for the whole run:
	// each new client costs 7 ms of CPU, the members' and this process's,
	// and a round trip (measured on the command's cluster).
	client    *clientv3.Client
	mu        sync.Mutex
	sandboxes int
}

func (r *deployment) Close() error { return r.cluster.Close() }

// Remote implements backend.Remote.
func (r *deployment) Remote() {}

// Failed implements backend.Failing: a member that ends unbidden fails
// the run, even if the others could go on without it.
func (r *deployment) Failed() <-chan struct{} { return r.cluster.Failed() }

// Err implements backend.Failing.
func (r *deployment) Err() error { return r.cluster.Err() }

// prefix names the n-th sandbox of the run.
func (r *deployment) prefix(name string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sandboxes++
	return fmt.Sprintf("/%s-%d/", name, r.sandboxes)
}

// NewPlace implements backend.Deployment.
func (r *deployment) NewSandbox(ctx context.Context, scenario string) (backend.Sandbox, error) {
	p := &sandbox{ctx: ctx, cluster: r.cluster, client: r.client, prefix: r.prefix(scenario), stopped: -1}
	text, err := json.Marshal(address{Endpoints: r.cluster.Endpoints(), Prefix: p.prefix})
	p.address = string(text)
	return p, err
}

// Explorable implements backend.Deployment: a store on a fresh prefix whose
// snapshot is every key under it. Its client talks to the leader alone:
// the explorer's steps are sequential round trips, and one sent to a
// follower waits for it to forward the proposal to the leader and to
// learn of the commit, two more hops between processes; no member fails
// while the explorer runs.
func (r *deployment) Rewindable(ctx context.Context) (backend.Rewindable, error) {
	client, err := r.leaderClient(ctx)
	if err != nil {
		return nil, err
	}
	return newExplorable(client, r.prefix("explore")), nil
}

// leaderClient is a client that talks to the leader alone.
func (r *deployment) leaderClient(ctx context.Context) (*clientv3.Client, error) {
	leader, err := r.cluster.Leader(ctx)
	if err != nil {
		return nil, err
	}
	return r.cluster.MemberClient(ctx, leader)
}

// sandbox is one scenario's prefix on the run's cluster. It is a
// backend.Cluster: the failover scenario kills and restarts the leader.
type sandbox struct {
	ctx     context.Context // the run's: an interrupted run cleans up nothing
	cluster *etcdcluster.Cluster
	client  *clientv3.Client // the controller's (the deployment's): the observer's, and for cleaning up
	prefix  string
	address string
	stopped int // the stopped member, or -1
}

func (p *sandbox) Address() string { return p.address }

// Close deletes every key under the prefix: what a scenario wrote is not
// left for the next one. The delete is bounded by the run's context: once
// the run is interrupted, the cluster goes with it, and waiting on it (a
// killed leader's connection, a lost quorum) would only hold up the end.
func (p *sandbox) Close() error {
	if p.ctx.Err() != nil {
		return nil
	}
	_, err := p.client.Delete(p.ctx, p.prefix, clientv3.WithPrefix())
	return err
}

// Observer implements backend.Observed: a store on the prefix through the
// deployment's client of every member.
func (p *sandbox) Observer() backend.Store {
	return heldStore{etcd.New(p.client, etcd.Options{Prefix: p.prefix, CallTimeout: callBound})}
}

func (p *sandbox) Members() int { return Members }

// StopLeader kills the leading member (SIGKILL) and returns once the
// others serve again: they have elected a leader, committed a write in
// its term, and each serves a linearizable read. Before that, a request
// may fail with "leader changed", and a scenario's next step would be an
// unknown outcome rather than the step it means to show.
func (p *sandbox) StopLeader(ctx context.Context) error {
	leader, err := p.cluster.Leader(ctx)
	if err != nil {
		return err
	}
	if err := p.cluster.Kill(leader); err != nil {
		return err
	}
	p.stopped = leader
	if _, err = p.cluster.Leader(ctx); err != nil {
		return err
	}
	// The same value every time: repeating the put changes nothing.
	for {
		_, err = p.client.Put(ctx, settledKey, "")
		if err == nil || ctx.Err() != nil || !transient(err) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("etcdbackend: the cluster did not take a write after its leader was killed: %w", err)
	}
	for i := range Members {
		if i == leader {
			continue
		}
		client, err := p.cluster.MemberClient(ctx, i)
		if err != nil {
			return err
		}
		_, err = client.Get(ctx, settledKey)
		if err := errors.Join(err, client.Close()); err != nil {
			return fmt.Errorf("etcdbackend: member %d did not serve a read after the leader was killed: %w", i, err)
		}
	}
	return nil
}

// settledKey is where StopLeader writes to learn that the cluster serves
// again; it is under no sandbox's prefix.
const settledKey = "/etcdbackend/settled"

// transient reports whether err is one etcd answers while a cluster
// changes leader, or while a client's connection to a killed member is
// still in its pool.
func transient(err error) bool {
	return errors.Is(rpctypes.Error(err), rpctypes.ErrLeaderChanged) || status.Code(err) == codes.Unavailable
}

// RestartStopped restarts the member StopLeader killed and returns once
// it serves a linearizable read, which it does only after it has applied
// everything the cluster committed up to the read.
func (p *sandbox) RestartStopped(ctx context.Context) error {
	if p.stopped < 0 {
		return errors.New("etcdbackend: no member was killed")
	}
	if err := p.cluster.Restart(ctx, p.stopped); err != nil {
		return err
	}
	client, err := p.cluster.MemberClient(ctx, p.stopped)
	if err != nil {
		return err
	}
	defer client.Close()
	_, err = client.Get(ctx, p.prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	p.stopped = -1
	return err
}

// OpenMember opens a store whose requests member i alone serves.
func (p *sandbox) OpenMember(ctx context.Context, i int) (backend.Store, error) {
	client, err := p.cluster.MemberClient(ctx, i)
	if err != nil {
		return nil, err
	}
	return newClientStore(client, p.prefix), nil
}
