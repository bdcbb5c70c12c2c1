package chaos_test

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"leases"
	"leases/health"
	"leases/internal/roles"
	"leases/postgres"
	"leases/postgres/pgtest"
	"leases/session"
	"leases/sqlite"
	"leases/testkit/childtest"
	"leases/testkit/testctx"
)

// leaderRole is the test binary re-executed as a service that leads on
// one resource with session.Lead until SIGTERM, serves its liveness probe
// (a health.Checker fed by its session's events) on a loopback port, and
// says on its standard output, as JSON lines (marks), what it did and
// when on the machine's wall clock. Its arguments: the driver (sqlite or
// pgx), the lessor's DSN, the holder's name and the TTL.
var leaderRole = roles.Register("handoff-leader", playLeader)

// mark is one line of a leader's output.
type mark struct {
	Event    string `json:"event"` // listening, refused, granted, deadline, renewed, released, ended, returned
	At       int64  `json:"at"`    // the wall clock, in Unix nanoseconds, after the event
	Addr     string `json:"addr,omitempty"`
	Epoch    int64  `json:"epoch,omitempty"`
	Expires  int64  `json:"expires,omitempty"`  // the lease's expiry, the lessor's tick (Unix ms)
	Deadline int64  `json:"deadline,omitempty"` // the session's deadline (Unix ms)
	Reason   string `json:"reason,omitempty"`   // session.EndReason of an end
	Err      string `json:"err,omitempty"`
}

// marks writes marks, one line each, from any goroutine.
type marks struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func (m *marks) put(mk mark) {
	mk.At = time.Now().UnixNano()
	m.mu.Lock()
	defer m.mu.Unlock()
	_ = m.enc.Encode(mk)
}

func playLeader(args []string) int {
	if len(args) != 4 {
		fmt.Fprintln(os.Stderr, "handoff-leader: want DRIVER DSN HOLDER TTL")
		return 2
	}
	ttl, err := time.ParseDuration(args[3])
	if err != nil {
		fmt.Fprintln(os.Stderr, "handoff-leader:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	lessor, closeStore, err := openLessor(ctx, args[0], args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "handoff-leader:", err)
		return 1
	}
	defer closeStore()
	out := &marks{enc: json.NewEncoder(os.Stdout)}
	live := health.New(health.Options{FailedRenewals: -1})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "handoff-leader:", err)
		return 1
	}
	go func() { _ = http.Serve(ln, live) }()
	out.put(mark{Event: "listening", Addr: ln.Addr().String()})
	opts := session.Options{TTL: ttl, OnEvent: func(ev session.Event) {
		live.OnEvent(ev)
		switch ev.Kind {
		case session.Granted, session.Renewed:
			out.put(mark{Event: "deadline", Epoch: ev.Epoch, Deadline: ev.Deadline.UnixMilli()})
		case session.Ended:
			out.put(mark{Event: "ended", Epoch: ev.Epoch, Reason: session.EndReason(ev.Err), Err: ev.Err.Error()})
		}
	}}
	err = session.Lead(ctx, &marked{Lessor: lessor, out: out}, "job", args[2], opts, session.Leader{
		OnStarted: func(ctx context.Context, s *session.Session) {
			out.put(mark{Event: "granted", Epoch: s.Epoch(), Expires: s.Lease().ExpiresAt, Deadline: s.Deadline().UnixMilli()})
			<-ctx.Done() // the leader's work, until it stops leading
		},
	})
	out.put(mark{Event: "returned", Err: err.Error()})
	if !errors.Is(err, context.Canceled) {
		return 1
	}
	return 0
}

// openLessor opens the lessor of driver at dsn.
func openLessor(ctx context.Context, driver, dsn string) (leases.Lessor, func(), error) {
	if driver == "sqlite" {
		store, err := sqlite.Open(ctx, dsn)
		if err != nil {
			return nil, nil, err
		}
		return store.Lessor(), func() { _ = store.Close() }, nil
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return nil, nil, err
	}
	store, err := postgres.New(db, postgres.Options{})
	if err != nil {
		return nil, nil, errors.Join(err, db.Close())
	}
	return store.Lessor(), func() { _ = db.Close() }, nil
}

// marked is a lessor that marks each refused acquire, each confirmed
// renewal (with its expiry) and each release, once it has returned.
type marked struct {
	leases.Lessor
	out *marks
}

func (l *marked) Acquire(ctx context.Context, resource, holder string, ttl time.Duration) (leases.Lease, error) {
	lease, err := l.Lessor.Acquire(ctx, resource, holder, ttl)
	if errors.Is(err, leases.ErrLeaseHeld) {
		l.out.put(mark{Event: "refused"})
	}
	return lease, err
}

func (l *marked) Renew(ctx context.Context, held leases.Lease, ttl time.Duration) (leases.Lease, error) {
	lease, err := l.Lessor.Renew(ctx, held, ttl)
	if err == nil {
		l.out.put(mark{Event: "renewed", Epoch: lease.Epoch, Expires: lease.ExpiresAt})
	}
	return lease, err
}

func (l *marked) Release(ctx context.Context, held leases.Lease) error {
	err := l.Lessor.Release(ctx, held)
	if err == nil {
		l.out.put(mark{Event: "released", Epoch: held.Epoch})
	}
	return err
}

// leader is a running leader process and its marks.
type leader struct {
	*childtest.Child
	name  string
	marks chan mark
	seen  []mark // every mark next has returned
}

// startLeader starts a leader process called name on the lessor.
func startLeader(t *testing.T, driver, dsn, name string, ttl time.Duration) *leader {
	t.Helper()
	l := &leader{Child: childtest.Start(t, leaderRole, driver, dsn, name, ttl.String()), name: name, marks: make(chan mark, 256)}
	go func(lines *bufio.Scanner) {
		defer close(l.marks)
		for lines.Scan() {
			var mk mark
			if err := json.Unmarshal(lines.Bytes(), &mk); err != nil {
				t.Errorf("%s: %q: %v", name, lines.Text(), err)
				continue
			}
			l.marks <- mk
		}
	}(l.Lines)
	return l
}

// next is the leader's next mark of one of the kinds, skipping others;
// the test fails if the process ends first or the test's bound passes.
func (l *leader) next(t *testing.T, kinds ...string) mark {
	t.Helper()
	ctx := testctx.Context(t)
	for {
		select {
		case mk, ok := <-l.marks:
			if !ok {
				t.Fatalf("%s ended before it said %v: %v", l.name, kinds, l.Wait())
			}
			l.seen = append(l.seen, mk)
			if slices.Contains(kinds, mk.Event) {
				return mk
			}
		case <-ctx.Done():
			t.Fatalf("%s never said %v: %v", l.name, kinds, context.Cause(ctx))
		}
	}
}

// expires is the latest expiry of the leader's lease it has told of,
// and its session's latest deadline (Unix ms).
func (l *leader) expires() (expires, deadline int64) {
	for _, mk := range l.seen {
		expires, deadline = max(expires, mk.Expires), max(deadline, mk.Deadline)
	}
	return expires, deadline
}

// lessors are the stores a leader can lead on: a SQLite file, and a
// PostgreSQL database (skipped where PostgreSQL is not installed).
var lessors = []struct {
	name string
	open func(t *testing.T) (driver, dsn string)
}{
	{"sqlite", func(t *testing.T) (string, string) { return "sqlite", filepath.Join(t.TempDir(), "leases.db") }},
	{"postgresql", func(t *testing.T) (string, string) {
		server := pgtest.New(t)
		db, err := server.Open()
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		store, err := postgres.New(db, postgres.Options{})
		if err == nil {
			err = store.Create(testctx.Context(t))
		}
		if err != nil {
			t.Fatal(err)
		}
		return "pgx", server.DSN("postgres")
	}},
}

// A leader told to stop (SIGTERM, as Kubernetes does) hands its lease
// over by releasing it, at once, not by letting it run out: the next
// leader, already waiting in another process, is granted long before
// the old lease would have expired. Each round stops the leader and
// measures, on the machine's wall clock, the signal to the release and
// the release to the next grant.
func TestShutdownHandsTheLeaseOver(t *testing.T) {
	const rounds, ttl = 6, 10 * time.Second
	for _, store := range lessors {
		t.Run(store.name, func(t *testing.T) {
			driver, dsn := store.open(t)
			current := startLeader(t, driver, dsn, "leader-0", ttl)
			current.next(t, "granted")
			var toRelease, toGrant []time.Duration
			for round := 1; round <= rounds; round++ {
				waiting := startLeader(t, driver, dsn, fmt.Sprintf("leader-%d", round), ttl)
				waiting.next(t, "refused") // it waits for the lease
				signalled := time.Now()
				if err := current.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
				released := current.next(t, "released")
				granted := waiting.next(t, "granted")
				current.next(t, "returned")
				if err := current.Wait(); err != nil {
					t.Fatalf("%s after SIGTERM: %v", current.name, err)
				}
				if expires, _ := current.expires(); granted.At/1e6 >= expires {
					t.Fatalf("round %d: granted at %d ms, not before the old lease's expiry %d: it ran out, it was not handed over",
						round, granted.At/1e6, expires)
				}
				toRelease = append(toRelease, time.Duration(released.At-signalled.UnixNano()))
				toGrant = append(toGrant, time.Duration(granted.At-released.At))
				current = waiting
			}
			t.Logf("%s, %d handoffs, TTL %v: SIGTERM to release %v; release to the next grant %v",
				store.name, rounds, ttl, spread(toRelease), spread(toGrant))
		})
	}
}

// probed is one probe's answer: when it came, green (200 OK in time) or
// not, and why not.
type probed struct {
	at      time.Time
	green   bool
	timeout bool // the probe's timeout passed without an answer
	why     string
}

// probe probes addr as a kubelet's httpGet probe does, every period with
// a timeout, until ctx ends, and sends each answer.
func probe(ctx context.Context, addr string, period, timeout time.Duration) <-chan probed {
	answers := make(chan probed, 1024)
	client := &http.Client{Timeout: timeout}
	go func() {
		defer close(answers)
		tick := time.NewTicker(period) // the probe's period: a timer of the prober
		defer tick.Stop()
		for {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/livez", nil)
			if err != nil {
				panic(err)
			}
			resp, err := client.Do(req)
			p := probed{at: time.Now()}
			var netErr net.Error
			switch {
			case ctx.Err() != nil:
				return
			case errors.As(err, &netErr) && netErr.Timeout():
				p.timeout, p.why = true, err.Error()
			case err != nil:
				p.why = err.Error()
			default:
				p.green, p.why = resp.StatusCode == http.StatusOK, resp.Status
				_ = resp.Body.Close()
			}
			answers <- p
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return answers
}

// A holder stopped (SIGSTOP) past its deadline is red to its liveness
// probe before the next holder is granted. A stopped process cannot
// answer: what a kubelet sees is its probe's timeout, which is red, and
// that is what this test checks, with a kubelet's default timeout (1 s),
// against a session of 5 s whose renewals come every 1.33 s: the next
// holder is granted only once the stopped holder's lease has expired,
// some 3.7 s or more after the stop. After SIGCONT, the stopped holder's
// session ends at once, definitely, with ErrDeadline (reason "deadline"),
// not as a failure it would retry.
func TestAPausedHoldersProbeIsRedBeforeTheNextGrant(t *testing.T) {
	for _, store := range lessors {
		t.Run(store.name, func(t *testing.T) { pausedHoldersProbe(t, store.open) })
	}
}

// pausedHoldersProbe is the test on the lessor that open opens.
func pausedHoldersProbe(t *testing.T, open func(t *testing.T) (driver, dsn string)) {
	const ttl, period, timeout = 5 * time.Second, 100 * time.Millisecond, time.Second
	driver, dsn := open(t)
	paused := startLeader(t, driver, dsn, "holder-a", ttl)
	addr := paused.next(t, "listening").Addr
	paused.next(t, "granted")
	next := startLeader(t, driver, dsn, "holder-b", ttl)
	next.next(t, "refused")

	ctx, stopProbing := context.WithCancel(testctx.Context(t))
	defer stopProbing()
	answers := probe(ctx, addr, period, timeout)
	green := false
	for p := range answers { // green while it holds, before the stop
		if green = p.green; green {
			break
		}
	}
	if !green {
		t.Fatal("the holder's probe was never green")
	}
	stopped := time.Now()
	if err := paused.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	granted := next.next(t, "granted")
	stopProbing()
	var red *probed
	for p := range answers {
		if red == nil && !p.green && p.at.After(stopped) {
			red = &p
		}
	}
	expires, deadline := paused.expires()
	grantedAt := time.Unix(0, granted.At)
	switch {
	case red == nil:
		t.Fatalf("no probe was red between the stop and the next grant (%v later)", grantedAt.Sub(stopped))
	case !red.timeout:
		t.Fatalf("the first red probe of the stopped holder was not its timeout: %s", red.why)
	case !red.at.Before(grantedAt):
		t.Fatalf("the probe turned red %v after the stop, not before the next grant, %v after it", red.at.Sub(stopped), grantedAt.Sub(stopped))
	case granted.At/1e6 < expires:
		t.Fatalf("the next holder was granted at %d ms, before the stopped holder's lease expired at %d", granted.At/1e6, expires)
	}
	t.Logf("after the stop: probe red (timeout %v) at %v, the stopped holder's deadline at %v, its lease's expiry at %v, the next grant at %v",
		timeout, red.at.Sub(stopped).Round(time.Millisecond), time.UnixMilli(deadline).Sub(stopped).Round(time.Millisecond),
		time.UnixMilli(expires).Sub(stopped).Round(time.Millisecond), grantedAt.Sub(stopped).Round(time.Millisecond))

	if err := paused.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if ended := paused.next(t, "ended"); ended.Reason != "deadline" {
		t.Fatalf("the stopped holder's session ended with %q (%s); want deadline", ended.Reason, ended.Err)
	}
}
