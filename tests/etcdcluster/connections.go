package etcdcluster

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// dropPeerConnections shuts down (shutdown(2), both ways; the owner still
// closes the descriptor) every established TCP connection that this
// process accepted on one of ports.
//
// Why: embed's Close gives its peer HTTP server one second to finish its
// connections (embed/etcd.go, servePeers: srv.Shutdown with a 1 s
// context) and a member's peer server nearly always has one that never
// finishes by itself. The peer listener wraps every connection in a
// timeoutConn (client/pkg/transport/timeout_conn.go) whose Read sets a
// fresh 5 s read deadline each time; net/http starts a background read
// before a bodiless request's handler, and after a handler that returns
// at once (a GET /version from a peer's keep-alive connection) it aborts
// that read by setting a deadline in the past, which the background read,
// if it had not yet reached Read, then overwrites. The connection stays
// "active" until the peer sends another request or closes, so Shutdown
// waits its full second and the goroutines outlive Close by up to 5 s.
// Shutting the connection down ends the read at once. This process owns
// every member, so these are connections it would close anyway.
func dropPeerConnections(ports ...int) error {
	wanted := map[int]bool{}
	for _, p := range ports {
		wanted[p] = true
	}
	inodes, err := establishedOn(wanted)
	if err != nil || len(inodes) == 0 {
		return err
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("etcdcluster: list descriptors: %w", err)
	}
	for _, entry := range fds {
		fd, err := strconv.Atoi(entry.Name())
		if err != nil {
			continue
		}
		target, err := os.Readlink(filepath.Join("/proc/self/fd", entry.Name()))
		if err != nil || !inodes[target] {
			continue // closed since the listing, or not one of ours
		}
		// Check the descriptor still is that socket right before the
		// shutdown: it may have been closed and reused in between.
		var st syscall.Stat_t
		if syscall.Fstat(fd, &st) != nil || fmt.Sprintf("socket:[%d]", st.Ino) != target {
			continue
		}
		_ = syscall.Shutdown(fd, syscall.SHUT_RDWR) // ENOTCONN: it ended meanwhile
	}
	return nil
}

// establishedOn returns the "socket:[inode]" names of the established
// IPv4 TCP connections whose local port is one of ports.
func establishedOn(ports map[int]bool) (map[string]bool, error) {
	f, err := os.Open("/proc/self/net/tcp")
	if err != nil {
		return nil, fmt.Errorf("etcdcluster: list connections: %w", err)
	}
	defer f.Close()
	inodes := map[string]bool{}
	lines := bufio.NewScanner(f)
	lines.Scan() // the header
	for lines.Scan() {
		fields := strings.Fields(lines.Text())
		if len(fields) < 10 || fields[3] != "01" { // 01: ESTABLISHED
			continue
		}
		_, portHex, ok := strings.Cut(fields[1], ":")
		port, err := strconv.ParseInt(portHex, 16, 32)
		if !ok || err != nil || !ports[int(port)] {
			continue
		}
		inodes["socket:["+fields[9]+"]"] = true
	}
	if err := lines.Err(); err != nil {
		return nil, fmt.Errorf("etcdcluster: list connections: %w", err)
	}
	return inodes, nil
}
