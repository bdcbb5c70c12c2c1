package chaos_test

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"leases/etcd"
	"leases/etcdcluster"
	"leases/fence"
	"leases/internal/roles"
	"leases/internal/rules"
	"leases/postgres"
	"leases/postgres/pgtest"
	"leases/sqlite"
	"leases/testkit/testctx"
	"leases/tests/chaos"
	"leases/tests/history"
)

// Config is one run of the chaos test: its workers, its leases, how long
// it runs, and its faults' parameters.
type Config struct {
	Dialect fence.Dialect // the workers' own database
	// Etcd makes the lessor a three-member etcd cluster of member
	// processes instead of a SQLite file.
	Etcd               bool
	Workers, Resources int
	TTL                time.Duration
	TxPerTenure        int
	Work               time.Duration // the most a worker works before each transaction
	// Run for at least this long, and until every kind of fault has
	// happened at least once (on etcd, and until a grant and an accepted
	// write have come after the cluster's last fault), ten times as long
	// at most.
	Duration time.Duration
	Seed     uint64
	// Every stop lasts from PauseMin to PauseMax: longer than the TTL,
	// so that the lease is given away meanwhile.
	PauseMin, PauseMax time.Duration
	// The chance of a fault at each announced point.
	PauseAfterCheck, PauseInTx, KillInTx, PauseInLessor, CommitHeld, CommitCut float64
	// On etcd, the chance that a Wait is given up while its grant's
	// answer comes back.
	GiveUpAtGrant float64
	// A fault at a random moment comes every RandomMin to RandomMax; it
	// is a kill with chance RandomKill, a stop otherwise.
	RandomMin, RandomMax time.Duration
	RandomKill           float64
	// The PostgreSQL server is killed every CrashMin to CrashMax.
	CrashMin, CrashMax time.Duration
	// On etcd, a fault of the cluster comes ClusterMin to ClusterMax
	// after the last one ended, and lasts ClusterFaultMin to
	// ClusterFaultMax.
	ClusterMin, ClusterMax           time.Duration
	ClusterFaultMin, ClusterFaultMax time.Duration
	// Guarded runs the guarded variant (servertime_linux_test.go).
	Guarded bool
}

// The kinds of faults, as the figures name them.
const (
	faultPauseAfterCheck = "stop after Check"
	faultPauseInTx       = "stop between the fence and COMMIT"
	faultCommitHeld      = "COMMIT held past the TTL"
	faultCommitCut       = "COMMIT held, the transaction cut off as it went out, the outcome resolved"
	faultPauseInLessor   = "stop holding the lessor's write lock while another worker holds a lease"
	faultPauseRandom     = "stop at a random moment"
	faultKillInTx        = "kill between the fence and COMMIT"
	faultKillRandom      = "kill at a random moment"
	faultServerCrash     = "database server killed and restarted"
	// The etcd cluster's faults: the lessor's.
	faultLeaderPartitioned = "etcd leader partitioned both ways, then healed"
	faultLeaderKilled      = "etcd leader killed, then restarted"
	faultLeaderPaused      = "etcd leader paused, then continued"
	faultFollowerPaused    = "etcd follower paused, then continued"
	// On etcd, the caller's: Wait's context ends while its grant's answer
	// comes back, and the answer is lost (issue 20).
	faultGiveUpAtGrant = "Wait given up as its grant's answer comes back"
)

// clusterFaults are the etcd cluster's faults, in the order the figures
// give them.
var clusterFaults = []string{faultLeaderPartitioned, faultLeaderKilled, faultLeaderPaused, faultFollowerPaused}

// proc is the controller's end of one worker process.
type proc struct {
	slot, holder string
	cmd          *exec.Cmd
	stdin        *os.File
	out          bytes.Buffer // every line it wrote; the reader's until exited
	stderr       *tail
	pausedSince  int64           // when it was stopped; 0 while it runs
	pendingAt    *history.Record // a point it announced while stopped
	parked       bool            // waiting at a point for the answer
	holding      bool            // holds a session (from Wait's return to its Done)
	killed       bool
	exited       bool
}

type (
	atEvent struct {
		p  *proc
		at history.Record
	}
	exitEvent struct {
		p   *proc
		err error
	}
	resumeEvent struct {
		p      *proc
		answer string
	}
	// backendEvent ends the stop of a worker's database backend.
	backendEvent struct{ pid int }
	// holdingEvent: a worker's session began or ended.
	holdingEvent struct {
		p       *proc
		holding bool
	}
	randomEvent struct{}
	crashEvent  struct{}
	// clusterEvent: time for the next fault of the etcd cluster;
	// clusterEndedEvent: the fault ended (the member serves again).
	clusterEvent      struct{}
	clusterEndedEvent struct {
		kind string
		at   int64 // when the fault was in effect
		err  error
	}
	crashedEvent struct {
		err      error
		from, to int64
	}
	// acceptedEvent: a grant (or an accepted write) invoked at call
	// returned.
	acceptedEvent struct {
		grant bool
		call  int64
	}
	stopEvent struct{}
)

// controller runs the workers and the faults of one run.
type controller struct {
	t        *testing.T
	cfg      Config
	rng      *rand.Rand
	events   chan any
	env      chaos.WorkerConfig   // every worker's, but for its holder and seed
	server   *pgtest.Server       // nil on SQLite
	cluster  *etcdcluster.Cluster // the lessor, on etcd; nil otherwise
	procs    []*proc              // every incarnation
	live     map[string]*proc     // by slot
	began    time.Time
	stopping bool
	crashing bool
	faulting bool // a fault of the cluster is under way
	// clusterAt are the moments the cluster's faults were in effect, by kind;
	// lastFault the latest of them. lastGrant and lastWrite are the
	// latest invocations of a grant and of an accepted write that
	// returned so far.
	clusterAt                       map[string][]int64
	lastFault, lastGrant, lastWrite int64
	faults                          map[string]int
	stopped                         map[string][]history.Interval
	downtime                        []time.Duration
	// backends are the database backends stopped now, to continue by
	// the end whatever happens: a stopped backend would hold the server's
	// shutdown forever.
	backends map[int]bool
	failures []string
	guarded  guardedRun // the guarded variant's held COMMITs
	// killed is when each killed worker was killed, by holder.
	killed map[string]int64
}

func run(t *testing.T, cfg Config) {
	ctx := testctx.Context(t)
	dir := t.TempDir()
	c := &controller{t: t, cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 1)), events: make(chan any, 64),
		live: map[string]*proc{}, faults: map[string]int{}, stopped: map[string][]history.Interval{}, backends: map[int]bool{},
		clusterAt: map[string][]int64{}, killed: map[string]int64{}}
	t.Logf("seed %d (LEASES_CHAOS_SEED replays the same choices of faults)", cfg.Seed)
	c.env = chaos.WorkerConfig{Lessor: dir + "/leases.db", Dialect: fence.SQLite, DSN: "file:" + dir + "/app.db" + sqliteParams,
		TTL: cfg.TTL, TxPerTenure: cfg.TxPerTenure, Work: cfg.Work}
	for i := range cfg.Resources {
		c.env.Resources = append(c.env.Resources, fmt.Sprintf("job-%d", i))
	}
	if cfg.Dialect == fence.PostgreSQL {
		c.server = pgtest.New(t, serverSettings(cfg)...)
		c.env.Dialect, c.env.DSN = fence.PostgreSQL, c.server.DSN("postgres")
	}
	if cfg.Etcd {
		cluster, err := etcdcluster.Start(ctx, etcdcluster.Options{Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cluster.Close() })
		c.cluster = cluster
		c.env.Lessor, c.env.Etcd = "", cluster.Endpoints()
	}
	if cfg.Guarded {
		c.guard()
	}
	c.setup(ctx)
	c.began = time.Now()
	for i := range cfg.Workers {
		c.start(ctx, fmt.Sprintf("w%d", i+1))
	}
	time.AfterFunc(c.interval(cfg.RandomMin, cfg.RandomMax), func() { c.events <- randomEvent{} })
	if c.server != nil {
		time.AfterFunc(c.interval(cfg.CrashMin, cfg.CrashMax), func() { c.events <- crashEvent{} })
	}
	if c.cluster != nil {
		time.AfterFunc(c.interval(cfg.ClusterMin, cfg.ClusterMax), func() { c.events <- clusterEvent{} })
	}
	time.AfterFunc(cfg.Duration, func() { c.events <- stopEvent{} })
	c.loop(ctx)
	ran := time.Since(c.began)
	if c.cluster != nil {
		if err := c.cluster.Err(); err != nil {
			c.failures = append(c.failures, err.Error())
		}
	}
	if len(c.failures) > 0 {
		t.Fatalf("the run failed:\n%s", strings.Join(c.failures, "\n"))
	}
	h := c.history(ctx)
	c.check(h, ran)
}

// keepEnv names a directory where each worker's records are kept, one
// file per process, for a look after the run.
const keepEnv = "LEASES_CHAOS_KEEP"

// sqliteParams are the worker database's: the write lock at BEGIN, an
// explicit busy timeout, WAL (docs/service.md).
const sqliteParams = "?_txlock=immediate&_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)"

// setup creates the lessor's file, the fence table and the business
// tables, with a counter at zero for each resource.
func (c *controller) setup(ctx context.Context) {
	if c.env.Lessor != "" {
		store, err := sqlite.Open(ctx, c.env.Lessor)
		if err != nil {
			c.t.Fatal(err)
		}
		if err := store.Close(); err != nil {
			c.t.Fatal(err)
		}
	}
	db := c.open()
	defer db.Close()
	fences, err := fence.New(db, fence.Options{Dialect: c.env.Dialect})
	if err != nil {
		c.t.Fatal(err)
	}
	if err := fences.Create(ctx); err != nil {
		c.t.Fatal(err)
	}
	for _, ddl := range chaos.Schema() {
		if _, err := db.ExecContext(ctx, ddl); err != nil {
			c.t.Fatal(err)
		}
	}
	for _, r := range c.env.Resources {
		if _, err := db.ExecContext(ctx, `INSERT INTO chaos_counters (resource, seq) VALUES ('`+r+`', 0)`); err != nil {
			c.t.Fatal(err)
		}
	}
	if c.cfg.Guarded {
		c.createLeases(ctx, db)
	}
}

func (c *controller) open() *sql.DB {
	db, err := sql.Open(chaos.Driver(c.env.Dialect), c.env.DSN)
	if err != nil {
		c.t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	return db
}

// start starts a worker process in slot, as a new holder.
func (c *controller) start(ctx context.Context, slot string) {
	incarnation := 1
	for _, p := range c.procs {
		if p.slot == slot {
			incarnation++
		}
	}
	env := c.env
	env.Holder = fmt.Sprintf("%s.%d", slot, incarnation)
	env.Seed = c.rng.Uint64()
	config, err := json.Marshal(env)
	if err != nil {
		c.t.Fatal(err)
	}
	p := &proc{slot: slot, holder: env.Holder, stderr: &tail{}}
	childIn, stdin, err := os.Pipe()
	if err != nil {
		c.t.Fatal(err)
	}
	stdout, childOut, err := os.Pipe()
	if err != nil {
		c.t.Fatal(err)
	}
	if p.cmd, err = workerRole.Command(); err != nil {
		c.t.Fatal(err)
	}
	p.cmd.Env = append(p.cmd.Env, chaos.WorkerEnv+"="+string(config))
	p.cmd.Stdin, p.cmd.Stdout, p.cmd.Stderr = childIn, childOut, p.stderr
	// A stopped worker cannot see its input end: the kernel kills it
	// when the controller's thread dies.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	_ = childIn.Close()
	_ = childOut.Close()
	p.stdin = stdin
	c.procs = append(c.procs, p)
	c.live[slot] = p
	go c.read(p, stdout)
}

// read forwards p's announcements to the loop and keeps every line; at
// the end of its output it waits for the process and reports its exit.
func (c *controller) read(p *proc, stdout *os.File) {
	defer stdout.Close()
	lines := bufio.NewScanner(stdout)
	lines.Buffer(make([]byte, 0, 64<<10), 1<<20)
	waits, txs := map[int64]bool{}, map[int64]bool{}
	accepting := map[int64]history.Record{} // acquires, renewals, transactions under way
	for lines.Scan() {
		p.out.Write(lines.Bytes())
		p.out.WriteByte('\n')
		var r history.Record
		if json.Unmarshal(lines.Bytes(), &r) != nil {
			continue // a line cut short by a kill
		}
		// A transaction's return is told to the loop (the guarded
		// variant's stale holder waits for it), and counted as a write.
		if r.Kind == "call" && r.Op == "tx" {
			txs[r.ID] = true
		}
		if r.Kind == "ret" && txs[r.ID] {
			delete(txs, r.ID)
			c.events <- txDoneEvent{p}
		}
		switch {
		case r.Kind == "at":
			c.events <- atEvent{p, r}
		case r.Kind == "call" && r.Op == "wait":
			waits[r.ID] = true
		case r.Kind == "call" && (r.Op == "acquire" || r.Op == "renew" || r.Op == "tx"):
			accepting[r.ID] = r
		case r.Kind == "ret" && accepting[r.ID].Op != "":
			if call := accepting[r.ID]; r.Result == "ok" {
				c.events <- acceptedEvent{grant: call.Op == "acquire", call: call.T}
			}
			delete(accepting, r.ID)
		case r.Kind == "ret" && waits[r.ID]:
			c.events <- holdingEvent{p, r.Result == "ok"}
		case r.Kind == "done":
			c.events <- holdingEvent{p, false}
		}
	}
	c.events <- exitEvent{p, p.cmd.Wait()}
}

// loop runs the workers until the run stops and every worker has
// exited.
func (c *controller) loop(ctx context.Context) {
	defer func() {
		for pid := range c.backends {
			c.continueBackend(pid)
		}
	}()
	for {
		if c.stopping && len(c.live) == 0 && !c.crashing && !c.faulting {
			return
		}
		var ev any
		select {
		case ev = <-c.events:
		case <-ctx.Done():
			c.failures = append(c.failures, fmt.Sprintf("the run did not end: %v", context.Cause(ctx)))
			for _, p := range c.live {
				_ = p.cmd.Process.Kill()
			}
			return
		}
		switch ev := ev.(type) {
		case atEvent:
			c.at(ev.p, ev.at)
		case txDoneEvent:
			c.txDone(ev.p)
		case holdingEvent:
			ev.p.holding = ev.holding
		case backendEvent:
			c.beforeContinue(ctx, ev.pid)
			c.continueBackend(ev.pid)
		case resumeEvent:
			c.resume(ev.p, ev.answer)
		case exitEvent:
			c.exited(ctx, ev.p, ev.err)
		case randomEvent:
			c.random()
		case crashEvent:
			c.crash(ctx)
		case crashedEvent:
			c.crashing = false
			if ev.err != nil {
				c.failures = append(c.failures, ev.err.Error())
				c.stop()
				continue
			}
			c.stopped["server"] = append(c.stopped["server"], history.Interval{From: ev.from, To: ev.to})
			c.downtime = append(c.downtime, time.Duration(ev.to-ev.from))
			if !c.stopping {
				time.AfterFunc(c.interval(c.cfg.CrashMin, c.cfg.CrashMax), func() { c.events <- crashEvent{} })
			}
		case clusterEvent:
			c.clusterFault(ctx)
		case clusterEndedEvent:
			c.faulting = false
			if ev.err != nil {
				c.failures = append(c.failures, ev.err.Error())
				c.stop()
				continue
			}
			c.clusterAt[ev.kind] = append(c.clusterAt[ev.kind], ev.at)
			c.lastFault = max(c.lastFault, ev.at)
			// Past the run's length, only faults still missing: the run
			// then ends once the last fault's figures are in.
			if !c.stopping && (len(c.missing()) > 0 || time.Since(c.began) < c.cfg.Duration) {
				time.AfterFunc(c.interval(c.cfg.ClusterMin, c.cfg.ClusterMax), func() { c.events <- clusterEvent{} })
			}
		case acceptedEvent:
			if ev.grant {
				c.lastGrant = max(c.lastGrant, ev.call)
			} else {
				c.lastWrite = max(c.lastWrite, ev.call)
			}
		case stopEvent:
			// Every kind of fault, and after the cluster's last fault a
			// grant and an accepted write, for its figures.
			figures := c.faulting || c.lastGrant < c.lastFault || c.lastWrite < c.lastFault
			if (len(c.missing()) > 0 || figures) && time.Since(c.began) < 10*c.cfg.Duration {
				time.AfterFunc(c.cfg.TTL, func() { c.events <- stopEvent{} })
				continue
			}
			c.stop()
		}
	}
}

// kinds are the faults of this run.
func (c *controller) kinds() []string {
	kinds := []string{faultPauseAfterCheck, faultPauseInTx, faultCommitHeld, faultPauseInLessor, faultPauseRandom, faultKillInTx, faultKillRandom}
	if c.cfg.Guarded { // no lessor's file, no write lock of SQLite's
		kinds = slices.DeleteFunc(kinds, func(k string) bool { return k == faultPauseInLessor })
		kinds = append(kinds, faultStaleAfterCheck)
	}
	if c.server != nil {
		kinds = append(kinds, faultCommitCut, faultServerCrash)
	}
	if c.cluster != nil {
		// No lessor's write lock to hold: etcd's transactions hold none.
		kinds = slices.DeleteFunc(kinds, func(k string) bool { return k == faultPauseInLessor })
		kinds = append(kinds, clusterFaults...)
		kinds = append(kinds, faultGiveUpAtGrant)
	}
	return kinds
}

// missing are the kinds of faults that have not happened yet.
func (c *controller) missing() []string {
	var missing []string
	for _, k := range c.kinds() {
		if c.faults[k] == 0 {
			missing = append(missing, k)
		}
	}
	return missing
}

// chance decides a fault of kind with probability p, or for certain once
// a third of the run has passed without one.
func (c *controller) chance(kind string, p float64) bool {
	if c.faults[kind] == 0 && time.Since(c.began) > c.cfg.Duration/3 {
		return true
	}
	return c.rng.Float64() < p
}

// at answers a worker that reached point: go on, or a fault there.
func (c *controller) at(p *proc, at history.Record) {
	if p.killed || p.exited {
		return
	}
	if p.pausedSince != 0 {
		p.pendingAt = &at // answered when it continues
		return
	}
	p.parked = true
	point := at.Point
	switch {
	case c.stopping:
		c.answer(p, "stop")
	case point == "granted":
		c.granted(p)
	case point == "checked" && c.cfg.Guarded && c.chance(faultStaleAfterCheck, c.cfg.PauseAfterCheck):
		c.staleAfterCheck(p)
	case point == "checked" && c.chance(faultPauseAfterCheck, c.cfg.PauseAfterCheck):
		c.pause(p, faultPauseAfterCheck, "go", 0)
	case point == "fenced" && c.chance(faultKillInTx, c.cfg.KillInTx):
		c.kill(p, faultKillInTx)
	case point == "fenced" && c.chance(faultPauseInTx, c.cfg.PauseInTx):
		c.pause(p, faultPauseInTx, "go", 0)
	case point == "sending" && at.Pid != 0 && c.chance(faultCommitCut, c.cfg.CommitCut):
		c.cut(p, at)
	case point == "committing" && c.chance(faultCommitHeld, c.cfg.CommitHeld):
		// On PostgreSQL the worker's backend too, which holds the
		// transaction and has the COMMIT to read.
		c.holdCommit(at)
		c.pause(p, faultCommitHeld, "go", at.Pid)
	case point == "lessor-locked" && c.othersHold(p) && c.chance(faultPauseInLessor, c.cfg.PauseInLessor):
		c.pause(p, faultPauseInLessor, "go", 0)
	case point == "grant-sent" && c.chance(faultGiveUpAtGrant, c.cfg.GiveUpAtGrant):
		c.faults[faultGiveUpAtGrant]++
		c.answer(p, chaos.AnswerGiveUp)
	default:
		c.answer(p, "go")
	}
}

// continueBackend continues a stopped database backend (one that the
// server's crash killed meanwhile is gone, and so is the error).
func (c *controller) continueBackend(pid int) {
	if c.backends[pid] {
		delete(c.backends, pid)
		_ = syscall.Kill(pid, syscall.SIGCONT)
	}
}

// othersHold reports whether a worker other than p holds a session and
// runs: one whose renewals a stop of p holding the lessor's write lock
// holds up, and whose session must still end on time.
func (c *controller) othersHold(p *proc) bool {
	for _, q := range c.live {
		if q != p && q.holding && !q.killed && q.pausedSince == 0 {
			return true
		}
	}
	return false
}

func (c *controller) answer(p *proc, answer string) {
	p.parked = false
	if _, err := p.stdin.WriteString(answer + "\n"); err != nil && !p.killed && !c.stopping {
		c.failures = append(c.failures, fmt.Sprintf("answer %s: %v%s", p.holder, err, p.stderr.saying()))
	}
}

// pause stops p with SIGSTOP for a fault's length, and with it the
// database backend backend (when not 0); then both continue, p with
// answer if it waits for one. The answer is written before SIGCONT, so
// that p goes on from where it stopped at once.
func (c *controller) pause(p *proc, kind, answer string, backend int) {
	if backend != 0 && !c.stopBackend(p, backend) {
		return
	}
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		c.failures = append(c.failures, fmt.Sprintf("stop %s: %v", p.holder, err))
		return
	}
	p.pausedSince = time.Now().UnixNano()
	c.faults[kind]++
	time.AfterFunc(c.interval(c.cfg.PauseMin, c.cfg.PauseMax), func() { c.events <- resumeEvent{p, answer} })
}

// stopBackend stops p's database backend with SIGSTOP for a fault's
// length, and then continues it; false when it could not be stopped.
func (c *controller) stopBackend(p *proc, backend int) bool {
	if err := syscall.Kill(backend, syscall.SIGSTOP); err != nil {
		c.failures = append(c.failures, fmt.Sprintf("stop the backend %d of %s: %v", backend, p.holder, err))
		return false
	}
	c.backends[backend] = true
	time.AfterFunc(c.interval(c.cfg.PauseMin, c.cfg.PauseMax), func() { c.events <- backendEvent{backend} })
	return true
}

// cut answers p, about to write a tenure's COMMIT, with
// chaos.AnswerCut: its backend is stopped first, so that it reads the
// COMMIT only when it continues, after p's transaction was cut off (its
// connection given up) and p has begun to resolve the outcome. A backend
// with a SIGSTOP pending runs no more of its own code: the COMMIT written
// after kill(2) returned waits for the SIGCONT. p's session goes on
// renewing the lease (on connections of its own), so that the COMMIT,
// when the backend reads it, may commit: a Resolve that answered "not
// committed" before the backend was done would then be wrong.
func (c *controller) cut(p *proc, at history.Record) {
	if !c.stopBackend(p, at.Pid) {
		c.answer(p, "go")
		return
	}
	c.holdCommit(at)
	c.faults[faultCommitCut]++
	c.answer(p, chaos.AnswerCut)
}

func (c *controller) resume(p *proc, answer string) {
	if p.killed || p.exited {
		return
	}
	if answer != "" {
		if c.stopping {
			answer = "stop"
		}
		c.answer(p, answer)
	}
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		c.failures = append(c.failures, fmt.Sprintf("continue %s: %v", p.holder, err))
	}
	c.stopped[p.holder] = append(c.stopped[p.holder], history.Interval{From: p.pausedSince, To: time.Now().UnixNano()})
	p.pausedSince = 0
	if at := p.pendingAt; at != nil {
		p.pendingAt = nil
		c.at(p, *at)
	}
}

func (c *controller) kill(p *proc, kind string) {
	p.killed = true
	_ = p.cmd.Process.Kill()
	c.killed[p.holder] = time.Now().UnixNano()
	c.faults[kind]++
	if p.pausedSince != 0 {
		c.stopped[p.holder] = append(c.stopped[p.holder], history.Interval{From: p.pausedSince, To: time.Now().UnixNano()})
		p.pausedSince = 0
	}
}

// random makes a fault at a random moment: a running worker that is not
// waiting at a point is stopped, or killed.
func (c *controller) random() {
	if c.stopping {
		return
	}
	var running []*proc
	for _, slot := range sortedKeys(c.live) {
		if p := c.live[slot]; p.pausedSince == 0 && !p.parked && !p.killed {
			running = append(running, p)
		}
	}
	if len(running) > 0 {
		p := running[c.rng.IntN(len(running))]
		if c.chance(faultKillRandom, c.cfg.RandomKill) {
			c.kill(p, faultKillRandom)
		} else {
			c.pause(p, faultPauseRandom, "", 0)
		}
	}
	time.AfterFunc(c.interval(c.cfg.RandomMin, c.cfg.RandomMax), func() { c.events <- randomEvent{} })
}

// crash kills the database server and starts it again, in a goroutine of
// its own: the workers go on meanwhile.
func (c *controller) crash(ctx context.Context) {
	if c.stopping {
		return
	}
	c.crashing = true
	c.faults[faultServerCrash]++
	go func() {
		from := time.Now().UnixNano()
		err := c.server.Crash(ctx)
		if err == nil {
			err = c.server.Restart(ctx)
		}
		c.events <- crashedEvent{err: err, from: from, to: time.Now().UnixNano()}
	}()
}

// clusterFault makes a fault of the etcd cluster, in a goroutine of its
// own: a kind that has not happened yet, or any. The fault's choices
// (kind, length, which follower) are made here, from the run's seed.
func (c *controller) clusterFault(ctx context.Context) {
	if c.stopping {
		return
	}
	kinds := clusterFaults
	if missing := slices.DeleteFunc(slices.Clone(clusterFaults), func(k string) bool { return c.faults[k] > 0 }); len(missing) > 0 {
		kinds = missing
	}
	kind := kinds[c.rng.IntN(len(kinds))]
	length := c.interval(c.cfg.ClusterFaultMin, c.cfg.ClusterFaultMax)
	follower := 1 + c.rng.IntN(c.cluster.Members()-1)
	c.faulting = true
	c.faults[kind]++
	go func() {
		at, err := c.applyClusterFault(ctx, kind, length, follower)
		c.events <- clusterEndedEvent{kind: kind, at: at, err: err}
	}()
}

// applyClusterFault makes one fault of the cluster, lasting length, ends
// it, and returns when it was in effect; for a follower's pause, the
// follower-th member after the leader. It returns once the member the
// fault was on serves again.
func (c *controller) applyClusterFault(ctx context.Context, kind string, length time.Duration, follower int) (int64, error) {
	cl := c.cluster
	leader, err := cl.Leader(ctx)
	if err != nil {
		return 0, err
	}
	var fault, end func(i int) error
	member := leader
	switch kind {
	case faultLeaderPartitioned:
		fault, end = cl.Partition, func(int) error { return cl.Heal() }
	case faultLeaderKilled:
		fault, end = cl.Kill, func(i int) error { return cl.Restart(ctx, i) }
	case faultFollowerPaused:
		member = (leader + follower) % cl.Members()
		fallthrough
	case faultLeaderPaused:
		fault, end = cl.Pause, cl.Continue
	}
	if err := fault(member); err != nil {
		return 0, fmt.Errorf("%s (member %d): %w", kind, member, err)
	}
	// In effect from now: the member is gone, stopped, or every member
	// has applied the cut.
	at := time.Now().UnixNano()
	// The fault's length is a parameter of the fault, not an order.
	timer := time.NewTimer(length)
	select {
	case <-timer.C:
	case <-ctx.Done():
		timer.Stop()
	}
	if err := end(member); err != nil {
		return at, fmt.Errorf("end %s (member %d): %w", kind, member, err)
	}
	return at, ctx.Err()
}

func (c *controller) exited(ctx context.Context, p *proc, err error) {
	p.exited = true
	delete(c.live, p.slot)
	c.txDone(p)
	switch {
	case p.killed:
		if !c.stopping {
			c.start(ctx, p.slot) // a new process, a new holder
		}
	case err != nil || !c.stopping:
		c.failures = append(c.failures, fmt.Sprintf("worker %s exited by itself (%v)%s", p.holder, err, p.stderr.saying()))
		c.stop()
	}
}

// stop ends the run: every worker's input is closed, which it takes as
// the order to end its job and exit; a stopped one sees it when it
// continues.
func (c *controller) stop() {
	if c.stopping {
		return
	}
	c.stopping = true
	for _, p := range c.live {
		_ = p.stdin.Close()
	}
}

// interval is a random duration from lo to hi.
func (c *controller) interval(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(c.rng.Int64N(int64(hi-lo)+1))
}

// history gathers the workers' records and the databases' final state.
func (c *controller) history(ctx context.Context) *history.History {
	h := &history.History{Stopped: c.stopped, Fences: map[string]int64{}, Counters: map[string]int64{}, Epochs: map[string]int64{}}
	if dir := os.Getenv(keepEnv); dir != "" {
		if err := os.MkdirAll(filepath.Join(dir, c.t.Name()), 0o755); err != nil {
			c.t.Error(err)
		}
		stops, _ := json.Marshal(c.stopped)
		if err := os.WriteFile(filepath.Join(dir, c.t.Name(), "stopped.json"), stops, 0o644); err != nil {
			c.t.Error(err)
		}
		for _, p := range c.procs {
			if err := os.WriteFile(filepath.Join(dir, c.t.Name(), p.holder+".jsonl"), p.out.Bytes(), 0o644); err != nil {
				if err = os.MkdirAll(filepath.Join(dir, c.t.Name()), 0o755); err == nil {
					err = os.WriteFile(filepath.Join(dir, c.t.Name(), p.holder+".jsonl"), p.out.Bytes(), 0o644)
				}
				if err != nil {
					c.t.Error(err)
				}
			}
		}
	}
	for _, p := range c.procs {
		if err := h.Read(p.holder, &p.out); err != nil {
			c.t.Fatal(err)
		}
		// A killed worker's calls still open will never return; what
		// they sent may still take effect (a server, a cluster).
		if at, killed := c.killed[p.holder]; killed {
			if err := h.Add(p.holder, history.Record{Kind: "killed", T: at}); err != nil {
				c.t.Fatal(err)
			}
		}
	}
	db := c.open()
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT resource, seq, epoch, writer, op, `+c.committedAt()+` FROM chaos_rows`)
	if err != nil {
		c.t.Fatal(err)
	}
	for rows.Next() {
		var r history.Row
		if err := rows.Scan(&r.Resource, &r.Seq, &r.Epoch, &r.Writer, &r.OpID, &r.CommittedAt); err != nil {
			c.t.Fatal(err)
		}
		h.Rows = append(h.Rows, r)
	}
	if err := rows.Err(); err != nil {
		c.t.Fatal(err)
	}
	readPairs(ctx, c.t, db, `SELECT resource, epoch FROM `+fence.DefaultTable, h.Fences)
	readPairs(ctx, c.t, db, `SELECT resource, seq FROM chaos_counters`, h.Counters)
	if c.cluster != nil {
		c.readEtcd(ctx, h)
		return h
	}
	if c.cfg.Guarded {
		readPairs(ctx, c.t, db, `SELECT resource, epoch FROM `+postgres.DefaultPrefix+`authority`, h.Epochs)
		return h
	}
	lessor, err := sql.Open("sqlite", "file:"+c.env.Lessor+"?mode=ro")
	if err != nil {
		c.t.Fatal(err)
	}
	defer lessor.Close()
	readPairs(ctx, c.t, lessor, `SELECT resource, epoch FROM authority_leases`, h.Epochs)
	return h
}

// readEtcd reads, from the etcd cluster's lease rows (the etcd store's
// keys under etcd.DefaultPrefix), the last epoch of each resource, and
// every write of the rows from the cluster's history (nothing compacts
// it): a watch from the first revision, up to the rows' latest write.
func (c *controller) readEtcd(ctx context.Context, h *history.History) {
	client, err := c.cluster.Client(ctx)
	if err != nil {
		c.t.Fatal(err)
	}
	defer client.Close()
	prefix := etcd.DefaultPrefix + "authority/"
	decode := func(kv *mvccpb.KeyValue) (string, rules.LeaseRow) {
		var row rules.LeaseRow
		if err := json.Unmarshal(kv.Value, &row); err != nil {
			c.t.Fatalf("the lease row %s at revision %d: %v", kv.Key, kv.ModRevision, err)
		}
		return strings.TrimPrefix(string(kv.Key), prefix), row
	}
	now, err := client.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		c.t.Fatal(err)
	}
	var last int64
	for _, kv := range now.Kvs {
		resource, row := decode(kv)
		h.Epochs[resource] = row.Epoch
		last = max(last, kv.ModRevision)
	}
	watch, stop := context.WithCancel(ctx)
	defer stop()
	h.LessorRows = []history.RowWrite{}
	for resp := range client.Watch(watch, prefix, clientv3.WithPrefix(), clientv3.WithRev(1)) {
		if err := resp.Err(); err != nil {
			c.t.Fatalf("the lease rows' history: %v", err)
		}
		var reached int64
		for _, ev := range resp.Events {
			resource, row := decode(ev.Kv)
			h.LessorRows = append(h.LessorRows, history.RowWrite{Resource: resource, Holder: row.Holder, Epoch: row.Epoch,
				Held: row.Held, Revision: ev.Kv.ModRevision})
			reached = max(reached, ev.Kv.ModRevision)
		}
		if reached >= last {
			return
		}
	}
	c.t.Fatalf("the lease rows' history ended before revision %d: %v", last, ctx.Err())
}

func readPairs(ctx context.Context, t *testing.T, db *sql.DB, query string, into map[string]int64) {
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		var v int64
		if err := rows.Scan(&k, &v); err != nil {
			t.Fatal(err)
		}
		into[k] = v
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}

// tail keeps the last few KiB a worker wrote on its standard error.
type tail struct{ roles.Tail }

func (t *tail) saying() string {
	if s := t.String(); s != "" {
		return "; its last words: " + s
	}
	return ""
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
