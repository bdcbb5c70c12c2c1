package etcdcluster

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// portReservation holds a loopback TCP port for the life of a cluster.
//
// embed cannot take listeners the caller opened: it builds its own from
// the URLs in its Config (embed/etcd.go, configurePeerListeners and
// configureClientListeners), and the peer URLs must be known before any
// member starts, since every member's initial cluster names them all. So
// a port must be chosen first and bound by embed later. "Listen on :0,
// note the port, close, hand it over" leaves a window in which another
// process can take the port. A reservation leaves none: a socket bound
// with SO_REUSEPORT but never listening. The kernel hands it a port no
// other socket holds, lets only sockets that also set SO_REUSEPORT (under
// the same user) bind that port while it stays open, never gives the port
// to an ephemeral bind or an outgoing connection, and sends no connection
// to it, since it does not listen. The members bind with SO_REUSEPORT too
// (embed's SocketOpts), so they, and a restarted member, always get it.
type portReservation struct {
	fd   int
	port int
}

func reservePort() (portReservation, error) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return portReservation{}, fmt.Errorf("reserve a port: %w", err)
	}
	r := portReservation{fd: fd}
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
		return portReservation{}, r.closeAfter(fmt.Errorf("reserve a port: SO_REUSEPORT: %w", err))
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return portReservation{}, r.closeAfter(fmt.Errorf("reserve a port: bind: %w", err))
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		return portReservation{}, r.closeAfter(fmt.Errorf("reserve a port: %w", err))
	}
	addr, ok := sa.(*syscall.SockaddrInet4)
	if !ok {
		return portReservation{}, r.closeAfter(fmt.Errorf("reserve a port: bound to %T, not IPv4", sa))
	}
	r.port = addr.Port
	return r, nil
}

// url is the reserved port's http URL on the loopback address.
func (r portReservation) url() string { return fmt.Sprintf("http://127.0.0.1:%d", r.port) }

func (r portReservation) close() error { return syscall.Close(r.fd) }

func (r portReservation) closeAfter(err error) error {
	_ = r.close()
	return err
}
