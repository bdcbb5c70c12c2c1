package toolchaos_test

import (
	"bytes"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// proxy is a TCP proxy between the agents and a tool server, which the
// test controls: it follows the server to the port of each restart, and
// cuts the connections of some calls as their answer comes back (after
// the server did the call), so that the agent does not hear it.
type proxy struct {
	ln       net.Listener
	upstream atomic.Pointer[string]
	// call says whether a request's first bytes are a tool call's;
	// answered whether an answer's bytes so far say the call was done.
	call, answered func([]byte) bool
	// cut decides, for each tool call, whether its answer is lost.
	cut  func() bool
	cuts atomic.Int64
	wg   sync.WaitGroup
}

func startProxy(t *testing.T, call, answered func([]byte) bool, cut func() bool) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, call: call, answered: answered, cut: cut}
	p.wg.Go(p.serve)
	t.Cleanup(func() {
		_ = ln.Close()
		p.wg.Wait()
	})
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) serve() {
	for {
		conn, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Go(func() { p.relay(conn) })
	}
}

// relay carries one connection; the server's end closes when the
// agent's does, and the other way round.
func (p *proxy) relay(agent net.Conn) {
	defer agent.Close()
	server, err := net.Dial("tcp", *p.upstream.Load())
	if err != nil {
		return // the server is down: the agent's connection closes unanswered
	}
	defer server.Close()
	first := make([]byte, 64<<10)
	n, err := agent.Read(first)
	if err != nil {
		return
	}
	if _, err := server.Write(first[:n]); err != nil {
		return
	}
	cut := p.call(first[:n]) && p.cut()
	go func() {
		_, _ = io.Copy(server, agent)
		_ = server.(*net.TCPConn).CloseWrite()
	}()
	if !cut {
		_, _ = io.Copy(agent, server)
		return
	}
	var answer bytes.Buffer
	buf := make([]byte, 4096)
	for !p.answered(answer.Bytes()) {
		n, err := server.Read(buf)
		answer.Write(buf[:n])
		if err != nil {
			return // closed before its answer: lost anyway
		}
	}
	p.cuts.Add(1)
}
