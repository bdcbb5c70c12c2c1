// Package etcdcluster runs an etcd cluster for tests and for the command
// run-experiment: each member its own OS process, this very binary
// re-executed in the role "etcd-member" (package roles), running etcd
// with go.etcd.io/etcd/server/v3/embed. A member that panics or exits is
// a member down, not the caller gone: the cluster says so (Failed, Err).
//
// A binary that uses it must call roles.Run first thing in its main or
// TestMain. It is a module of its own (leases/etcdcluster), so that only
// what starts a cluster requires etcd's server.
//
// What the harness controls: Kill (SIGKILL), Pause and Continue (SIGSTOP
// and SIGCONT; not on Windows), Restart, and Partition and Heal: every
// member's peer traffic runs through a proxy on its advertised peer URL,
// in the member's own process (proxy.go), which the harness tells over
// the member's stdin which members are cut off. Client traffic goes to
// the members directly.
//
// Order comes from handshakes, never from sleeps: a member reports on its
// stdout, one JSON line each, that etcd runs (its pid and Raft ID), that
// it serves (etcd's ReadyNotify), each leader it learns of
// (LeaderChangedNotify), and each command of the harness it applied;
// every wait is on those reports or on a process's exit, bounded by the
// caller's context. A member exits when its stdin ends, so when the
// harness's process dies; on Linux the kernel also kills it then
// (PR_SET_PDEATHSIG), which is what ends a paused one.
//
// Members listen on loopback ports, log only errors (to a stderr whose
// telling line the harness keeps), keep their data in a directory of the
// cluster's own that Close removes and the next Start sweeps if a killed
// run left it (sweep.go), preallocate write-ahead log segments of
// WALSegmentBytes instead of etcd's 64 MB, and run with etcd's
// UnsafeNoFsync: what the tests simulate is a process that dies, and the
// kernel keeps whatever it wrote, fsynced or not; a power loss, which
// fsync is for, is not simulated.
package etcdcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Timing of the members' Raft: a heartbeat every TickMs, an election after
// ElectionMs without one. The election timeout is short, so that a new
// leader is elected in a few hundred milliseconds, and long enough that a
// loaded two-core machine (go test runs packages side by side, -race slows
// every step) does not miss heartbeats for that long and change leaders
// in the middle of a test. Eight heartbeats to an election timeout (etcd
// wants five at least), not twenty: each tick wakes every member process,
// and at 10 ms an idle cluster of three took a quarter of a core (0.8 s of
// CPU in 3 s, measured; 0.15 s at 50 ms).
const (
	TickMs     = 25
	ElectionMs = 200
)

// WALSegmentBytes is the size of a member's preallocated write-ahead log
// segments (etcd's wal.SegmentSizeBytes, 64 MB by default, two files per
// member: 367 MB left by every killed run of three members). A test
// cluster writes far less than this.
const WALSegmentBytes = 1 << 20

// Options tune a cluster; the zero value is three members in a directory
// under os.TempDir().
type Options struct {
	// Members is how many members the cluster has; 3 when zero.
	Members int
	// Dir is where the cluster makes its directory; os.TempDir() when
	// empty.
	Dir string
	// Wrap, when set, gives the words to put in front of member i's
	// command: strace and its options, say, to make its system calls
	// fail. The harness still signals the member itself.
	Wrap func(member int) []string
}

// Cluster is a running etcd cluster of member processes. Its methods are
// safe for concurrent use.
type Cluster struct {
	dir     string
	unlock  func() error
	members []*member
	wrap    func(int) []string

	failed   chan struct{} // closed at the first member that ended unbidden
	failOnce sync.Once
	failure  error

	mu      sync.Mutex
	changed chan struct{} // closed and replaced when a member's state changes
	clients []*clientv3.Client
	closed  bool
	seq     int64 // of the last command sent to the members
}

// member is one member's state across its incarnations.
type member struct {
	name   string
	peer   portReservation // its advertised peer URL, where its proxy listens
	client portReservation
	id     string   // its Raft ID (hex), once known; the same on every restart
	proc   *process // the current process; nil while down
	view   string   // the leader its current process last named
	paused bool     // by Pause, until Continue
	cut    bool     // by Partition, until Heal
}

// Start starts a cluster and returns once every member serves and a
// majority names one leader. On error nothing is left running.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	n := opts.Members
	if n == 0 {
		n = 3
	}
	if n < 1 {
		return nil, fmt.Errorf("etcdcluster: %d members; want at least 1", n)
	}
	dir, unlock, err := makeDir(opts.Dir)
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir, unlock: unlock, wrap: opts.Wrap, failed: make(chan struct{}), changed: make(chan struct{})}
	for i := range n {
		m := &member{name: "m" + strconv.Itoa(i)}
		c.members = append(c.members, m)
		if m.peer, err = reservePort(); err == nil {
			m.client, err = reservePort()
		}
		if err != nil {
			return nil, errors.Join(err, c.Close())
		}
	}
	// Start every member before waiting for any: none is ready before a
	// quorum has elected a leader.
	for i := range n {
		if err := c.startMember(i); err != nil {
			return nil, errors.Join(err, c.Close())
		}
	}
	// A member that fails meanwhile ends the wait: without it the others
	// may never be ready.
	for i := range n {
		if err := c.waitReady(ctx, i, c.failed); err != nil {
			return nil, errors.Join(err, c.Close())
		}
	}
	if _, err := c.Leader(ctx); err != nil {
		return nil, errors.Join(err, c.Close())
	}
	return c, nil
}

// config is member i's configuration: the same on every start, but for
// the members cut off then; c.mu is held.
func (c *Cluster) config(i int) memberConfig {
	names, urls := make([]string, len(c.members)), make([]string, len(c.members))
	for j, m := range c.members {
		names[j], urls[j] = m.name, loopbackURL(m.peer)
	}
	return memberConfig{
		Name:           c.members[i].name,
		Dir:            filepath.Join(c.dir, c.members[i].name),
		InitialCluster: joinCluster(names, urls),
		PeerURL:        urls[i],
		ClientURL:      c.endpoint(i),
		ReusePort:      reusePort,
		Cut:            c.cutLocked(),
		TickMs:         TickMs,
		ElectionMs:     ElectionMs,
		WALSegment:     WALSegmentBytes,
	}
}

func (c *Cluster) endpoint(i int) string { return loopbackURL(c.members[i].client) }

// loopbackURL is the http URL of a reserved loopback port.
func loopbackURL(r portReservation) string { return "http://127.0.0.1:" + strconv.Itoa(r.port) }

// startMember starts a process for member i, which must be down.
func (c *Cluster) startMember(i int) error {
	var wrap []string
	if c.wrap != nil {
		wrap = c.wrap(i)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errors.New("etcdcluster: cluster closed")
	}
	if c.members[i].proc != nil {
		return fmt.Errorf("etcdcluster: member %d is running", i)
	}
	p, err := startProcess(c.config(i), wrap, func(p *process, r report) { c.reported(i, p, r) }, func(p *process) { c.ended(i, p) })
	if err != nil {
		return err
	}
	c.members[i].proc = p
	c.notifyLocked()
	return nil
}

// reported takes a report of member i's process p.
func (c *Cluster) reported(i int, p *process, r report) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.members[i]
	if m.proc != p {
		return // an earlier incarnation's last words
	}
	if r.ID != "" {
		m.id = r.ID
	}
	if r.Leader != "" {
		m.view = r.Leader
	}
	if r.Ack > p.acked {
		p.acked = r.Ack
	}
	c.notifyLocked()
}

// ended takes the end of member i's process p: a member down, and, if
// the harness did not end it, the cluster's failure. It runs before p's
// exited is closed, so that Close, which waits for that, returns knowing
// of every failure.
func (c *Cluster) ended(i int, p *process) {
	c.mu.Lock()
	m := c.members[i]
	if m.proc == p {
		m.proc, m.view, m.paused = nil, "", false
	}
	c.notifyLocked()
	c.mu.Unlock()
	if !p.bidden() {
		c.failOnce.Do(func() {
			c.failure = fmt.Errorf("etcdcluster: member %s (pid %d) ended unbidden: %s", m.name, p.cmd.Process.Pid, p.ended())
			close(c.failed)
		})
	}
}

// notifyLocked wakes everyone waiting for a change; c.mu is held.
func (c *Cluster) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// Failed is closed when a member process ends without the harness asking
// (a panic, a fatal error, a kill from outside); Err then says which and
// how. Members the harness kills or closes are not failures.
func (c *Cluster) Failed() <-chan struct{} { return c.failed }

// Err is why Failed was closed, or nil.
func (c *Cluster) Err() error {
	select {
	case <-c.failed:
		return c.failure
	default:
		return nil
	}
}

// waitReady waits until member i serves, fails, or ctx ends, or failed
// is closed.
func (c *Cluster) waitReady(ctx context.Context, i int, failed <-chan struct{}) error {
	c.mu.Lock()
	p, name := c.members[i].proc, c.members[i].name
	c.mu.Unlock()
	if p == nil {
		return fmt.Errorf("etcdcluster: member %s is down", name)
	}
	select {
	case <-p.ready: // closed also when the process ended first
	case <-failed:
		return fmt.Errorf("etcdcluster: waiting for %s to be ready: %w", name, c.Err())
	case <-ctx.Done():
		return fmt.Errorf("etcdcluster: waiting for %s to be ready: %w", name, context.Cause(ctx))
	}
	if !p.running() {
		return fmt.Errorf("etcdcluster: member %s ended before it was ready: %s", name, p.ended())
	}
	return nil
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Members is how many members the cluster has, running or not.
func (c *Cluster) Members() int { return len(c.members) }

// Endpoints returns every member's client URL, in member order, running
// or not.
func (c *Cluster) Endpoints() []string {
	endpoints := make([]string, len(c.members))
	for i := range c.members {
		endpoints[i] = c.endpoint(i)
	}
	return endpoints
}

// ID returns member i's Raft ID, as etcd's responses carry it; 0 before
// the member first started.
func (c *Cluster) ID(i int) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	id, _ := strconv.ParseUint(c.members[i].id, 16, 64)
	return id
}

// PID returns the pid of member i's process; ok is false while it is down.
func (c *Cluster) PID(i int) (pid int, ok bool) {
	c.mu.Lock()
	p := c.members[i].proc
	c.mu.Unlock()
	if p == nil || !isClosed(p.hello) || p.pid == 0 {
		return 0, false
	}
	return p.pid, true
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
	if err := c.check(i); err != nil {
		return nil, err
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

func (c *Cluster) check(i int) error {
	if i < 0 || i >= len(c.members) {
		return fmt.Errorf("etcdcluster: no member %d in a cluster of %d", i, len(c.members))
	}
	return nil
}

// Leader returns the index of the member that leads: one that runs, is
// neither paused nor cut off, names itself leader, and is named so by a
// majority of all members that run, are neither paused nor cut off (each
// by its last report). It waits, bounded by ctx, until there is one.
func (c *Cluster) Leader(ctx context.Context) (int, error) {
	for {
		c.mu.Lock()
		leader, changed := c.leaderLocked(), c.changed
		c.mu.Unlock()
		if leader >= 0 {
			return leader, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return -1, fmt.Errorf("etcdcluster: waiting for a leader: %w", context.Cause(ctx))
		}
	}
}

func (c *Cluster) leaderLocked() int {
	votes := map[string]int{}
	for _, m := range c.members {
		if m.reachable() {
			votes[m.view]++
		}
	}
	for i, m := range c.members {
		if m.reachable() && m.id != "" && m.view == m.id && 2*votes[m.id] > len(c.members) {
			return i
		}
	}
	return -1
}

// reachable reports whether the member runs and the harness has neither
// paused it nor cut it off; c.mu is held.
func (m *member) reachable() bool { return m.proc != nil && !m.paused && !m.cut }

// Kill kills member i with SIGKILL (TerminateProcess on Windows) and
// returns once the process is gone. Its data stays, for Restart.
func (c *Cluster) Kill(i int) error {
	if err := c.check(i); err != nil {
		return err
	}
	c.mu.Lock()
	p := c.members[i].proc
	c.mu.Unlock()
	if p == nil {
		return fmt.Errorf("etcdcluster: member %d is down", i)
	}
	p.kill()
	<-p.exited
	return nil
}

// Restart starts member i, which must be down, on its own data directory
// and addresses, and returns once it has rejoined the cluster and serves.
func (c *Cluster) Restart(ctx context.Context, i int) error {
	if err := c.check(i); err != nil {
		return err
	}
	if err := c.startMember(i); err != nil {
		return err
	}
	return c.waitReady(ctx, i, nil)
}

// Pause stops member i's process with SIGSTOP: it answers nobody, and its
// connections stay open. Not on Windows (errors.ErrUnsupported).
func (c *Cluster) Pause(i int) error { return c.signal(i, stop, true) }

// Continue lets a paused member i go on (SIGCONT).
func (c *Cluster) Continue(i int) error { return c.signal(i, resume, false) }

func (c *Cluster) signal(i int, send func(pid int) error, paused bool) error {
	if err := c.check(i); err != nil {
		return err
	}
	pid, ok := c.PID(i)
	if !ok {
		return fmt.Errorf("etcdcluster: member %d is down", i)
	}
	if err := send(pid); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.members[i].paused = paused
	c.notifyLocked()
	return nil
}

// Partition cuts member i off from every other member, both ways: every
// peer connection from or to it is dropped, and new ones are refused,
// until Heal. Clients still reach it. It returns once every member that
// runs has applied it, except a paused one, which applies it as soon as
// it is continued (and may pass a message or two first).
func (c *Cluster) Partition(i int) error {
	if err := c.check(i); err != nil {
		return err
	}
	c.mu.Lock()
	if c.members[i].id == "" {
		c.mu.Unlock()
		return fmt.Errorf("etcdcluster: member %d never started", i)
	}
	c.members[i].cut = true
	return c.commandLocked()
}

// Heal ends every partition; the members connect again on their own. It
// returns once every member that runs and is not paused has applied it.
func (c *Cluster) Heal() error {
	c.mu.Lock()
	for _, m := range c.members {
		m.cut = false
	}
	return c.commandLocked()
}

// cutLocked is the IDs of the members cut off; c.mu is held.
func (c *Cluster) cutLocked() []string {
	cut := []string{}
	for _, m := range c.members {
		if m.cut {
			cut = append(cut, m.id)
		}
	}
	return cut
}

// commandLocked tells every running member which members are cut off,
// releases c.mu, and waits until each that is not paused has said it
// applied it, or has ended.
func (c *Cluster) commandLocked() error {
	c.seq++
	cmd := command{Seq: c.seq, Cut: c.cutLocked()}
	var told []*process
	var errs []error
	for _, m := range c.members {
		if m.proc == nil {
			continue
		}
		if err := m.proc.send(cmd); err != nil {
			errs = append(errs, fmt.Errorf("etcdcluster: tell %s: %w", m.name, err))
		} else if !m.paused {
			told = append(told, m.proc)
		}
	}
	c.notifyLocked()
	for {
		waiting := false
		for _, p := range told {
			waiting = waiting || (p.acked < cmd.Seq && p.running())
		}
		changed := c.changed
		c.mu.Unlock()
		if !waiting {
			return errors.Join(errs...)
		}
		<-changed // an acknowledgement, or a member's end
		c.mu.Lock()
	}
}

// Close closes every client the cluster handed out, kills every member,
// closes the proxies and removes the cluster's directory. Nothing the
// cluster started runs after Close returns.
func (c *Cluster) Close() error {
	c.mu.Lock()
	c.closed = true
	clients := c.clients
	c.clients = nil
	var procs []*process
	for _, m := range c.members {
		if m.proc != nil {
			procs = append(procs, m.proc)
		}
	}
	c.mu.Unlock()
	var errs []error
	for _, client := range clients {
		// A client the caller closed already says so; that is no fault.
		if err := client.Close(); err != nil && !errors.Is(err, context.Canceled) {
			errs = append(errs, err)
		}
	}
	for _, p := range procs {
		p.kill()
	}
	for _, p := range procs {
		<-p.exited
	}
	for _, m := range c.members {
		for _, r := range []portReservation{m.peer, m.client} {
			if r.port != 0 {
				errs = append(errs, r.close())
			}
		}
	}
	errs = append(errs, os.RemoveAll(c.dir), c.unlock())
	return errors.Join(errs...)
}
