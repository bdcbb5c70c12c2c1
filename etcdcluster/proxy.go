package etcdcluster

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
)

// The peer proxies. Every member advertises, as its peer URL, a reserved
// port on which a proxy in the member's own process listens and forwards
// each connection to the member's real peer listener; client traffic goes
// to the members directly. The harness tells every member, over its
// stdin, which members are cut off (Partition), and each member's proxy
// drops what a partition forbids.
//
// Cutting off member i at i's own proxy is not enough, because of how
// etcd's rafthttp connects (server/etcdserver/api/rafthttp, v3.7.3):
// member i receives messages from peer p on a stream that i dials into
// p's advertised URL (streamReader.dial, a GET that p answers by writing
// to it for as long as it lasts), and it sends pipeline POSTs and
// snapshots by dialing p too. So i's traffic to p and from p both run on
// connections that i opened, through p's proxy. What tells them apart is
// the header that rafthttp sets on every stream GET and every pipeline or
// snapshot POST: X-Server-From, the sender's member ID. Each proxy reads
// the head of the first request on each connection and tags the
// connection with that ID (a connection belongs to one process, so every
// later request on it is from the same member). Member i's proxy, once i
// is cut off, drops every connection and refuses new ones; every other
// member's proxy drops and refuses those tagged with i's ID. Requests
// without the header (a peer's GET /version, its probes) are dropped only
// where they lead to a member cut off: they carry no Raft messages.
//
// Why in the member's process, not the harness's: every Raft message
// passes a proxy, and a proxy in the caller's process waits for the
// caller's goroutines (the command explores SQLite's schedules on its
// cores at the same time): measured, the etcd exploration took 0.4-0.5 s
// longer that way.

// maxHead bounds the request head the proxy reads before forwarding;
// rafthttp's are a few hundred bytes.
const maxHead = 16 << 10

// link is one forwarded connection, from the member whose ID its first
// request named ("" when none did, or before it was read).
type link struct {
	from string   // set under peerProxy.mu
	down net.Conn // the dialer's side

	mu     sync.Mutex
	up     net.Conn // the member's side, once dialed
	closed bool
}

// attach sets the member's side, unless the link was closed meanwhile.
func (l *link) attach(up net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.up = up
	return true
}

func (l *link) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	_ = l.down.Close()
	if l.up != nil {
		_ = l.up.Close()
	}
}

// peerProxy stands in front of one member's peer listener.
type peerProxy struct {
	listener net.Listener
	started  chan struct{} // closed once self and target are known
	self     string        // this member's ID
	target   string        // its peer listener's address

	mu    sync.Mutex
	cut   map[string]bool // IDs of the members cut off
	links map[*link]bool
}

// newPeerProxy serves l, with the members whose IDs are in cut cut off.
func newPeerProxy(l net.Listener, cut []string) *peerProxy {
	p := &peerProxy{listener: l, started: make(chan struct{}), links: map[*link]bool{}}
	p.setCut(cut)
	go p.accept()
	return p
}

// start gives the proxy this member's ID and its peer listener's address,
// once etcd has bound it; connections that carry Raft messages wait for
// it.
func (p *peerProxy) start(self, target string) {
	p.self, p.target = self, target
	close(p.started)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropForbiddenLocked()
}

func (p *peerProxy) accept() {
	for {
		conn, err := p.listener.Accept()
		if err != nil {
			return // the member is going
		}
		go p.forward(conn)
	}
}

// forward tags a connection, connects it to the member, and copies both
// ways until either side ends or a partition drops it.
func (p *peerProxy) forward(down net.Conn) {
	l := &link{down: down}
	p.mu.Lock()
	p.links[l] = true
	p.mu.Unlock()
	defer p.remove(l)
	in := bufio.NewReaderSize(down, maxHead)
	head, from, err := readHead(in)
	if err != nil || !p.tag(l, from) {
		l.close()
		return
	}
	up, err := net.Dial("tcp", p.target)
	if err != nil || !l.attach(up) || p.forbidden(l) {
		if up != nil {
			_ = up.Close()
		}
		l.close()
		return
	}
	if _, err := up.Write(head); err != nil {
		l.close()
		return
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, in); done <- struct{}{} }()
	go func() { _, _ = io.Copy(down, up); done <- struct{}{} }()
	<-done
	l.close() // ends the other copy
	<-done
}

// tag records whom l comes from. A connection that carries Raft messages
// waits until etcd has started (members start side by side; one dropped
// would be dialed again only after rafthttp's retry interval, 100 ms). One
// that does not is dropped at once if etcd has not: a starting member
// asks its peers whether the cluster exists already, and a request held
// until a peer starting at the same time is up would hold that member for
// its whole bootstrap timeout (1 s a peer), while a dropped one tells it
// at once. tag reports whether l may go on.
func (p *peerProxy) tag(l *link, from string) bool {
	if from != "" {
		<-p.started
	} else {
		select {
		case <-p.started:
		default:
			return false
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	l.from = from
	return !p.forbiddenLocked(l)
}

// readHead reads the head of the first HTTP request on a connection and
// returns it with the value of its X-Server-From header.
func readHead(in *bufio.Reader) (head []byte, from string, err error) {
	for len(head) < maxHead {
		line, err := in.ReadSlice('\n')
		head = append(head, line...)
		if err != nil {
			return head, "", err
		}
		trimmed := bytes.TrimRight(line, "\r\n")
		if len(trimmed) == 0 {
			return head, from, nil
		}
		if name, value, ok := bytes.Cut(trimmed, []byte(":")); ok && bytes.EqualFold(bytes.TrimSpace(name), []byte("X-Server-From")) {
			from = string(bytes.TrimSpace(value))
		}
	}
	return head, "", errors.New("request head too long")
}

func (p *peerProxy) forbidden(l *link) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.forbiddenLocked(l)
}

// forbiddenLocked reports whether a partition forbids l: this member is
// cut off, or l comes from one that is; p.mu is held.
func (p *peerProxy) forbiddenLocked(l *link) bool {
	return (p.self != "" && p.cut[p.self]) || (l.from != "" && p.cut[l.from])
}

func (p *peerProxy) remove(l *link) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.links, l)
}

// setCut cuts off exactly the members whose IDs are in ids, dropping
// every link that that forbids.
func (p *peerProxy) setCut(ids []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = map[string]bool{}
	for _, id := range ids {
		p.cut[id] = true
	}
	p.dropForbiddenLocked()
}

func (p *peerProxy) dropForbiddenLocked() {
	for l := range p.links {
		if p.forbiddenLocked(l) {
			l.close() // its goroutine removes it
		}
	}
}
