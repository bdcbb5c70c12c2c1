//go:build unix

package etcdcluster

import (
	"context"
	"fmt"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// portReservation holds a loopback TCP port for a member's clients for
// the life of the cluster, so that a killed member restarts on the same
// address and its clients find it again.
//
// embed cannot take a listener from its caller: it builds its own from
// the URLs in its Config. "Listen on :0, note the port, close, hand it
// over" leaves a window in which any process can take the port, before
// the first start and again between a kill and a restart. A reservation
// leaves none: a socket bound with SO_REUSEPORT but never listening. The
// kernel gives it a port no other socket holds, lets only sockets that
// also set SO_REUSEPORT (under the same user) bind that port while it
// stays open, never hands the port to an ephemeral bind or an outgoing
// connection, and sends no connection to it, since it does not listen.
// The member binds with SO_REUSEPORT too (embed's SocketOpts).
type portReservation struct {
	fd   int
	port int
}

// reusePort says whether members bind beside a reservation.
const reusePort = true

func reservePort() (portReservation, error) {
	// Close-on-exec, set under ForkLock as package net does where
	// socket(2) cannot set it (darwin): no member must inherit it.
	syscall.ForkLock.RLock()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err == nil {
		unix.CloseOnExec(fd)
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return portReservation{}, fmt.Errorf("reserve a port: %w", err)
	}
	r := portReservation{fd: fd}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
		return portReservation{}, r.closeAfter(fmt.Errorf("reserve a port: SO_REUSEPORT: %w", err))
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return portReservation{}, r.closeAfter(fmt.Errorf("reserve a port: bind: %w", err))
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return portReservation{}, r.closeAfter(fmt.Errorf("reserve a port: %w", err))
	}
	addr, ok := sa.(*unix.SockaddrInet4)
	if !ok {
		return portReservation{}, r.closeAfter(fmt.Errorf("reserve a port: bound to %T, not IPv4", sa))
	}
	r.port = addr.Port
	return r, nil
}

func (r portReservation) close() error { return syscall.Close(r.fd) }

func (r portReservation) closeAfter(err error) error {
	_ = r.close()
	return err
}

// listenPeer listens on addr beside the harness's reservation of its port
// (SO_REUSEPORT): a member's proxy, on the member's advertised peer URL.
func listenPeer(addr string) (net.Listener, error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var err error
		if ctrl := c.Control(func(fd uintptr) {
			err = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		}); ctrl != nil {
			return ctrl
		}
		return err
	}}
	return lc.Listen(context.Background(), "tcp", addr)
}
