// Package etcdcluster runs an etcd cluster inside the test process, with
// go.etcd.io/etcd/server/v3/embed: no etcd binary, no fixed ports, logs
// silenced, data in a directory the caller owns.
//
// Members listen on loopback ports that the cluster reserves for its whole
// life (see ports.go), so a stopped member restarts on the same addresses
// and clients find it again. Every wait is on a notification from etcd
// (ReadyNotify, a leader change) and bounded by the caller's context.
//
// Members run with etcd's UnsafeNoFsync. What the tests here simulate is a
// member process that stops ([Cluster.Stop]): the kernel keeps whatever the
// member wrote, fsynced or not, so skipping fsync changes no outcome they
// can see. It would matter for a power loss, which they do not simulate;
// what it saves is most of a member's start-up time and every write's
// flush.
package etcdcluster

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"sync"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver"
	"go.uber.org/zap"
)

// Timing of the members' Raft: a heartbeat every TickMs, an election after
// ElectionMs without one. Short, so that a cluster starts and a new leader
// is elected in tens of milliseconds; long enough that a loaded two-core
// machine (go test runs packages side by side, -race slows every step)
// does not miss heartbeats and change leaders in the middle of a test.
const (
	TickMs     = 10
	ElectionMs = 200
)

// Cluster is a running etcd cluster whose members live in this process.
// Its methods are safe for concurrent use.
type Cluster struct {
	dir     string
	members []*member

	mu      sync.Mutex
	clients []*clientv3.Client
	closed  bool
}

type member struct {
	name         string
	peer, client portReservation
	etcd         *embed.Etcd // nil while stopped
}

// Start starts a cluster of members members, each with its data in a
// directory of its own under dir, and returns once every member is ready
// to serve and a leader is elected. On error nothing is left running.
func Start(ctx context.Context, dir string, members int) (*Cluster, error) {
	if members < 1 {
		return nil, fmt.Errorf("etcdcluster: %d members; want at least 1", members)
	}
	c := &Cluster{dir: dir}
	for i := range members {
		m := &member{name: fmt.Sprintf("m%d", i)}
		c.members = append(c.members, m)
		var err error
		if m.peer, err = reservePort(); err == nil {
			m.client, err = reservePort()
		}
		if err != nil {
			return nil, errors.Join(err, c.Close())
		}
	}
	// Start every member before waiting for any: none is ready before a
	// quorum has elected a leader.
	for i, m := range c.members {
		e, err := embed.StartEtcd(c.config(i))
		if err != nil {
			return nil, errors.Join(fmt.Errorf("etcdcluster: start %s: %w", m.name, err), c.Close())
		}
		c.mu.Lock()
		m.etcd = e
		c.mu.Unlock()
	}
	for _, m := range c.members {
		if err := ready(ctx, m); err != nil {
			return nil, errors.Join(err, c.Close())
		}
	}
	if _, err := c.Leader(ctx); err != nil {
		return nil, errors.Join(err, c.Close())
	}
	return c, nil
}

// config is member i's configuration: a new cluster the first time, and
// the same data directory, which embed then recognises, on a restart.
func (c *Cluster) config(i int) *embed.Config {
	m := c.members[i]
	cfg := embed.NewConfig()
	cfg.Name = m.name
	cfg.Dir = filepath.Join(c.dir, m.name)
	peer, client := mustURL(m.peer.url()), mustURL(m.client.url())
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	initial := make([]string, len(c.members))
	for j, other := range c.members {
		initial[j] = other.name + "=" + other.peer.url()
	}
	cfg.InitialCluster = strings.Join(initial, ",")
	cfg.InitialClusterToken = "etcdcluster"
	cfg.TickMs, cfg.ElectionMs = TickMs, ElectionMs
	// Bind the reserved ports alongside the reservations (ports.go).
	cfg.SocketOpts = transport.SocketOpts{ReusePort: true}
	cfg.Logger = "zap"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.UnsafeNoFsync = true      // see the package comment
	cfg.EnableGRPCGateway = false // nothing here speaks JSON over HTTP
	return cfg
}

func mustURL(s string) url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(fmt.Sprintf("etcdcluster: %q: %v", s, err))
	}
	return *u
}

// ready waits until m serves clients, m fails, or ctx ends.
func ready(ctx context.Context, m *member) error {
	select {
	case <-m.etcd.Server.ReadyNotify():
		return nil
	case err := <-m.etcd.Err():
		return fmt.Errorf("etcdcluster: %s failed before it was ready: %w", m.name, err)
	case <-m.etcd.Server.StopNotify():
		return fmt.Errorf("etcdcluster: %s stopped before it was ready", m.name)
	case <-ctx.Done():
		return fmt.Errorf("etcdcluster: waiting for %s to be ready: %w", m.name, context.Cause(ctx))
	}
}

// Endpoints returns every member's client URL, in member order, running
// or not.
func (c *Cluster) Endpoints() []string {
	endpoints := make([]string, len(c.members))
	for i, m := range c.members {
		endpoints[i] = m.client.url()
	}
	return endpoints
}

// Client returns a client of the whole cluster (every member's endpoint)
// once it has reached a member, waiting no longer than ctx. Close closes
// it if the caller has not.
func (c *Cluster) Client(ctx context.Context) (*clientv3.Client, error) {
	return c.newClient(ctx, c.Endpoints())
}

// MemberClient returns a client that talks to member i only, once the
// member has answered it, waiting no longer than ctx. Close closes it if
// the caller has not.
func (c *Cluster) MemberClient(ctx context.Context, i int) (*clientv3.Client, error) {
	if i < 0 || i >= len(c.members) {
		return nil, fmt.Errorf("etcdcluster: no member %d in a cluster of %d", i, len(c.members))
	}
	return c.newClient(ctx, c.Endpoints()[i:i+1])
}

func (c *Cluster) newClient(ctx context.Context, endpoints []string) (*clientv3.Client, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, errors.New("etcdcluster: cluster closed")
	}
	client, err := clientv3.New(clientv3.Config{Endpoints: endpoints, Logger: zap.NewNop()})
	if err == nil {
		c.clients = append(c.clients, client)
	}
	c.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("etcdcluster: client of %v: %w", endpoints, err)
	}
	// clientv3.New does not connect; one round trip shows it can.
	if _, err := client.MemberList(ctx); err != nil {
		return nil, fmt.Errorf("etcdcluster: client of %v: %w", endpoints, err)
	}
	return client, nil
}

// Leader returns the index of the member that leads the cluster, waiting
// until the running members know one that is running.
func (c *Cluster) Leader(ctx context.Context) (int, error) {
	for {
		c.mu.Lock()
		var server *etcdserver.EtcdServer // of the first running member
		for _, m := range c.members {
			if m.etcd != nil {
				server = m.etcd.Server
				break
			}
		}
		c.mu.Unlock()
		if server == nil {
			return -1, errors.New("etcdcluster: no member is running")
		}
		// Take the notification before reading the leader, so that a
		// change in between is not missed.
		changed := server.LeaderChangedNotify()
		if i := c.runningMember(uint64(server.Leader())); i >= 0 {
			return i, nil
		}
		select {
		case <-changed:
		case <-server.StopNotify():
		case <-ctx.Done():
			return -1, fmt.Errorf("etcdcluster: waiting for a leader: %w", context.Cause(ctx))
		}
	}
}

// runningMember is the index of the running member with Raft ID id, or -1.
func (c *Cluster) runningMember(id uint64) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, m := range c.members {
		if id != 0 && m.etcd != nil && uint64(m.etcd.Server.MemberID()) == id {
			return i
		}
	}
	return -1
}

// Stop stops member i as abruptly as embed allows: its Raft node halts at
// once, with no leadership transfer and no goodbye to its peers
// (EtcdServer.HardStop), and then its listeners and goroutines are closed
// (Etcd.Close). Requests in flight on it fail. Unlike a killed process it
// finishes the write it is in the middle of, and what it wrote stays (see
// the package comment on fsync). A stopped member is not running until
// Restart.
func (c *Cluster) Stop(i int) error {
	c.mu.Lock()
	if i < 0 || i >= len(c.members) || c.members[i].etcd == nil {
		c.mu.Unlock()
		return fmt.Errorf("etcdcluster: member %d is not running", i)
	}
	e := c.members[i].etcd
	c.members[i].etcd = nil
	c.mu.Unlock()
	e.Server.HardStop()
	err := dropPeerConnections(c.members[i].peer.port)
	e.Close()
	return err
}

// Restart starts stopped member i again on its own data directory and
// addresses, and waits until it has rejoined the cluster and serves.
func (c *Cluster) Restart(ctx context.Context, i int) error {
	c.mu.Lock()
	if i < 0 || i >= len(c.members) || c.members[i].etcd != nil || c.closed {
		c.mu.Unlock()
		return fmt.Errorf("etcdcluster: member %d is not stopped", i)
	}
	c.mu.Unlock()
	e, err := embed.StartEtcd(c.config(i))
	if err != nil {
		return fmt.Errorf("etcdcluster: restart %s: %w", c.members[i].name, err)
	}
	c.mu.Lock()
	if c.closed { // Close ran meanwhile and could not see this member
		c.mu.Unlock()
		e.Server.HardStop()
		e.Close()
		return fmt.Errorf("etcdcluster: restart %s: the cluster was closed", c.members[i].name)
	}
	c.members[i].etcd = e
	c.mu.Unlock()
	return ready(ctx, c.members[i])
}

// Close closes every client the cluster handed out, stops every member
// (halting every Raft first, then closing them side by side: at the end
// of a test nothing needs a leadership transfer) and gives up the
// reserved ports. Nothing the cluster started runs after Close returns.
func (c *Cluster) Close() error {
	c.mu.Lock()
	c.closed = true
	clients, members := c.clients, c.members
	c.clients = nil
	c.mu.Unlock()
	var errs []error
	for _, client := range clients {
		// A client the caller closed already says so; that is no fault.
		if err := client.Close(); err != nil && !errors.Is(err, context.Canceled) {
			errs = append(errs, err)
		}
	}
	// First halt every member's Raft, so that nobody dials a closing
	// member, then close them all, side by side (see connections.go).
	var running []*embed.Etcd
	for _, m := range members {
		c.mu.Lock()
		if m.etcd != nil {
			running = append(running, m.etcd)
		}
		m.etcd = nil
		c.mu.Unlock()
	}
	forEach(running, func(e *embed.Etcd) { e.Server.HardStop() })
	var peerPorts []int
	for _, m := range members {
		peerPorts = append(peerPorts, m.peer.port)
	}
	errs = append(errs, dropPeerConnections(peerPorts...))
	forEach(running, (*embed.Etcd).Close)
	for _, m := range members {
		for _, r := range []portReservation{m.peer, m.client} {
			if r.port != 0 {
				errs = append(errs, r.close())
			}
		}
	}
	return errors.Join(errs...)
}

// forEach calls do on every member at once and returns when all are done.
func forEach(members []*embed.Etcd, do func(*embed.Etcd)) {
	var wg sync.WaitGroup
	for _, e := range members {
		wg.Go(func() { do(e) })
	}
	wg.Wait()
}
