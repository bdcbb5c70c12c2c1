package etcdcluster

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
)

// The peer network. Every member advertises, as its peer URL, a listener
// of the harness (its proxy) that forwards each connection to the
// member's own peer listener; client traffic goes to the members
// directly. Partition(i) cuts member i off from the others, both ways.
//
// Cutting i's own proxy is not enough, because of how etcd's rafthttp
// connects (server/etcdserver/api/rafthttp, v3.7.3): member i receives
// messages from peer p on a stream that i dials into p's advertised URL
// (streamReader.dial, a GET that p answers by writing to it for as long
// as it lasts), and it sends pipeline POSTs and snapshots by dialing p
// too. So i's traffic to p and from p both run on connections that i
// opened, through p's proxy. What tells them apart is the header that
// rafthttp sets on every stream GET and every pipeline or snapshot POST:
// X-Server-From, the sender's member ID. The proxy reads the head of the
// first request on each connection, tags the connection with that ID
// (a connection belongs to one process, so every later request on it is
// from the same member) and with the member it leads to; a partition of
// i drops every connection from or to i and refuses new ones. Requests
// without the header (a peer's GET /version, its probes) are tagged by
// where they lead only: they carry no Raft messages.

// maxHead bounds the request head the proxy reads before forwarding;
// rafthttp's are a few hundred bytes.
const maxHead = 16 << 10

// link is one forwarded connection: from the member whose ID its first
// request named ("" when none did, or before it was read) to member to.
type link struct {
	from string // set under peerNet.mu
	to   int
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

// peerNet is the proxies and the partitions between them.
type peerNet struct {
	// target returns the address of member i's peer listener, waiting
	// for a starting member to say it if wait is set; ok is false while
	// there is none to forward to.
	target    func(i int, wait bool) (addr string, ok bool)
	listeners []net.Listener
	wg        sync.WaitGroup

	mu     sync.Mutex
	ids    []string // member i's ID, once it said it
	cut    map[int]bool
	links  map[*link]bool
	closed bool
}

// listenPeers opens one proxy listener per member on a loopback port.
func listenPeers(members int, target func(int, bool) (string, bool)) (*peerNet, error) {
	n := &peerNet{target: target, ids: make([]string, members), cut: map[int]bool{}, links: map[*link]bool{}}
	for range members {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, errors.Join(fmt.Errorf("etcdcluster: peer proxy: %w", err), n.close())
		}
		n.listeners = append(n.listeners, l)
	}
	for i, l := range n.listeners {
		n.wg.Go(func() { n.accept(l, i) })
	}
	return n, nil
}

// setID records member i's ID, which its peers name it by.
func (n *peerNet) setID(i int, id string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.ids[i] = id
}

// url is member i's advertised peer URL: its proxy.
func (n *peerNet) url(i int) string { return "http://" + n.listeners[i].Addr().String() }

func (n *peerNet) accept(l net.Listener, to int) {
	for {
		conn, err := l.Accept()
		if err != nil {
			return // closed
		}
		n.wg.Go(func() { n.forward(conn, to) })
	}
}

// forward tags a connection to member to, connects it to the member, and
// copies both ways until either side ends or a partition drops it.
func (n *peerNet) forward(down net.Conn, to int) {
	l := &link{to: to, down: down}
	if !n.add(l) {
		l.close()
		return
	}
	defer n.remove(l)
	in := bufio.NewReaderSize(down, maxHead)
	head, from, err := readHead(in)
	if err != nil || !n.tag(l, from) {
		l.close()
		return
	}
	addr, running := n.target(to, from != "")
	if !running {
		l.close()
		return
	}
	up, err := net.Dial("tcp", addr)
	if err != nil {
		l.close()
		return
	}
	if !l.attach(up) {
		_ = up.Close()
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

// droppedLocked reports whether the proxies are closed or a partition
// forbids l; n.mu is held.
func (n *peerNet) droppedLocked(l *link) bool {
	if n.closed || n.cut[l.to] {
		return true
	}
	for i := range n.cut {
		if l.from != "" && l.from == n.ids[i] {
			return true
		}
	}
	return false
}

// add registers l unless a partition forbids it.
func (n *peerNet) add(l *link) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.droppedLocked(l) {
		return false
	}
	n.links[l] = true
	return true
}

// tag records whom l comes from, unless a partition forbids that.
func (n *peerNet) tag(l *link, from string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	l.from = from
	return !n.droppedLocked(l)
}

func (n *peerNet) remove(l *link) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.links, l)
}

// partition cuts member i off: it drops every link from or to i, and
// refuses new ones until heal.
func (n *peerNet) partition(i int) {
	n.mu.Lock()
	n.cut[i] = true
	var drop []*link
	for l := range n.links {
		if n.droppedLocked(l) {
			drop = append(drop, l)
		}
	}
	n.mu.Unlock()
	for _, l := range drop {
		l.close()
	}
}

// heal ends every partition.
func (n *peerNet) heal() {
	n.mu.Lock()
	defer n.mu.Unlock()
	clear(n.cut)
}

// close closes every proxy and link and waits for their goroutines.
func (n *peerNet) close() error {
	n.mu.Lock()
	n.closed = true
	links := n.links
	n.links = map[*link]bool{}
	n.mu.Unlock()
	var errs []error
	for _, l := range n.listeners {
		errs = append(errs, l.Close())
	}
	for l := range links {
		l.close()
	}
	n.wg.Wait()
	return errors.Join(errs...)
}
