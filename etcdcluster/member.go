package etcdcluster

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"sync"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"leases/internal/roles"
)

// MemberRole is the part a member process plays: this binary, re-executed
// (see package roles), runs one etcd member with embed. A test binary
// whose members are started by a child of its own (the command it plays)
// calls MemberRole.MaySkip, so that roles.CheckUnused does not count the
// role as forgotten.
var MemberRole = roles.Register("etcd-member", playMember)

// memberConfig is what a member process is told, as its one argument.
type memberConfig struct {
	Name           string   `json:"name"`
	Dir            string   `json:"dir"`
	InitialCluster string   `json:"initial_cluster"` // name=advertised peer URL, ...
	PeerURL        string   `json:"peer_url"`        // advertised; the member's proxy listens on it
	ClientURL      string   `json:"client_url"`      // listened on and advertised
	ReusePort      bool     `json:"reuse_port"`      // bind both beside the harness's reservations (ports_unix.go)
	Cut            []string `json:"cut"`             // IDs of the members cut off as it starts
	TickMs         uint     `json:"tick_ms"`
	ElectionMs     uint     `json:"election_ms"`
	WALSegment     int64    `json:"wal_segment_bytes"`
}

// report is one line a member process writes on its stdout, as JSON: a
// hello once etcd runs, ready once it serves, its view of the leader each
// time it learns of a new one, and the acknowledgement of each command.
type report struct {
	PID    int    `json:"pid,omitempty"`
	ID     string `json:"id,omitempty"` // its Raft member ID, as etcd prints it (hex)
	Ready  bool   `json:"ready,omitempty"`
	Leader string `json:"leader,omitempty"` // the member ID it now follows or is
	Ack    int64  `json:"ack,omitempty"`    // the sequence number of a command applied
}

// command is one line the harness writes on a member's stdin, as JSON:
// the members cut off from now on (the whole set, so that a command
// repeated changes nothing), numbered for its acknowledgement.
type command struct {
	Seq int64    `json:"seq"`
	Cut []string `json:"cut"`
}

// playMember runs one member until its input ends (its parent is gone or
// is done with it) or etcd fails. It never returns status 0 on a failure:
// the parent tells a member it ended from one that failed by whether it
// asked for the end.
func playMember(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "etcd-member: want one argument, the member's configuration")
		return 2
	}
	var cfg memberConfig
	if err := json.Unmarshal([]byte(args[0]), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "etcd-member:", err)
		return 2
	}
	// Die with the parent: a stopped member cannot see its input end.
	if err := dieWithParent(); err != nil {
		fmt.Fprintln(os.Stderr, "etcd-member:", err)
		return 1
	}
	proxyListener, err := listenPeer(strings.TrimPrefix(cfg.PeerURL, "http://"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcd-member: peer proxy:", err)
		return 1
	}
	proxy := newPeerProxy(proxyListener, cfg.Cut)
	var out reporter
	go obey(os.Stdin, proxy, &out)
	wal.SegmentSizeBytes = cfg.WALSegment
	e, err := embed.StartEtcd(cfg.embed())
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcd-member: start:", err)
		return 1
	}
	proxy.start(e.Server.MemberID().String(), e.Peers[0].Listener.Addr().String())
	out.send(report{PID: os.Getpid(), ID: e.Server.MemberID().String()})
	go reportLeaders(e, &out)
	select {
	case <-e.Server.ReadyNotify():
		out.send(report{Ready: true})
	case err := <-e.Err():
		fmt.Fprintln(os.Stderr, "etcd-member: failed before it was ready:", err)
		return 1
	case <-e.Server.StopNotify():
		fmt.Fprintln(os.Stderr, "etcd-member: the server stopped before it was ready")
		return 1
	}
	select {
	case err := <-e.Err():
		fmt.Fprintln(os.Stderr, "etcd-member:", err)
	case <-e.Server.StopNotify():
		fmt.Fprintln(os.Stderr, "etcd-member: the server stopped")
	}
	return 1
}

// reportLeaders tells the harness each leader the member learns of, until
// the server stops.
func reportLeaders(e *embed.Etcd, out *reporter) {
	for {
		// Take the notification before reading the leader, so that a
		// change in between is not missed.
		changed := e.Server.LeaderChangedNotify()
		if lead := e.Server.Leader(); lead != 0 {
			out.send(report{Leader: lead.String()})
		}
		select {
		case <-changed:
		case <-e.Server.StopNotify():
			return
		}
	}
}

// obey applies the harness's commands to the proxy, acknowledging each,
// until its input ends: then the harness is gone, or done with this
// member, and the member exits at once; nobody waits for a goodbye.
func obey(in io.Reader, proxy *peerProxy, out *reporter) {
	lines := bufio.NewScanner(in)
	for lines.Scan() {
		var cmd command
		if err := json.Unmarshal(lines.Bytes(), &cmd); err != nil {
			fmt.Fprintln(os.Stderr, "etcd-member: garbled command:", err)
			os.Exit(2)
		}
		proxy.setCut(cmd.Cut)
		out.send(report{Ack: cmd.Seq})
	}
	os.Exit(0)
}

// reporter writes reports, one whole line at a time.
type reporter struct{ mu sync.Mutex }

func (r *reporter) send(rep report) {
	line, _ := json.Marshal(rep)
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, err := os.Stdout.Write(append(line, '\n')); err != nil {
		os.Exit(1) // the parent stopped reading: it is gone
	}
}

// embed is the member's embed configuration: a new cluster the first
// time, and the same data directory, which embed then recognises, on a
// restart. The peer listener takes any free port (the proxy in front of
// it, on the reserved peer port, is what the others dial); the client
// listener takes the reserved client port, so that clients find a
// restarted member where it was.
func (cfg memberConfig) embed() *embed.Config {
	e := embed.NewConfig()
	e.Name = cfg.Name
	e.Dir = cfg.Dir
	e.ListenPeerUrls = []url.URL{mustURL("http://127.0.0.1:0")}
	e.AdvertisePeerUrls = []url.URL{mustURL(cfg.PeerURL)}
	e.ListenClientUrls = []url.URL{mustURL(cfg.ClientURL)}
	e.AdvertiseClientUrls = e.ListenClientUrls
	e.InitialCluster = cfg.InitialCluster
	e.InitialClusterToken = "etcdcluster"
	e.TickMs, e.ElectionMs = cfg.TickMs, cfg.ElectionMs
	e.SocketOpts = transport.SocketOpts{ReusePort: cfg.ReusePort}
	// Errors only, on stderr, which the parent keeps the tail of and
	// shows when the member fails; etcd's info and warnings are noise.
	e.Logger = "zap"
	e.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.New(zapcore.NewCore(
		zapcore.NewConsoleEncoder(zapcore.EncoderConfig{MessageKey: "msg", LevelKey: "level", EncodeLevel: zapcore.LowercaseLevelEncoder}),
		zapcore.Lock(os.Stderr), zapcore.ErrorLevel)))
	e.UnsafeNoFsync = true      // see the package comment
	e.EnableGRPCGateway = false // nothing here speaks JSON over HTTP
	return e
}

func mustURL(s string) url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(fmt.Sprintf("etcdcluster: %q: %v", s, err))
	}
	return *u
}

// joinCluster is the initial-cluster string: name=URL for every member.
func joinCluster(names, urls []string) string {
	pairs := make([]string, len(names))
	for i := range names {
		pairs[i] = names[i] + "=" + urls[i]
	}
	return strings.Join(pairs, ",")
}
