//go:build !unix

package etcdcluster

import (
	"fmt"
	"net"
)

// portReservation is a loopback TCP port for a member's clients. Without
// SO_REUSEPORT (Windows) nothing can hold a port for a process that binds
// it later: the port is one that was free a moment before, and another
// process could take it before the member binds it, or between a kill and
// a restart; the member then fails to start, saying so.
type portReservation struct{ port int }

// reusePort says whether members bind beside a reservation.
const reusePort = false

func reservePort() (portReservation, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return portReservation{}, fmt.Errorf("find a free port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	return portReservation{port: port}, l.Close()
}

func (r portReservation) close() error { return nil }

// listenPeer listens on addr: a member's proxy, on the member's advertised
// peer URL.
func listenPeer(addr string) (net.Listener, error) { return net.Listen("tcp", addr) }
