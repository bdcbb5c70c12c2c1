package chaos

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	modernc "modernc.org/sqlite"

	"leases"
	"leases/clock"
	"leases/etcd"
	"leases/fence"
	"leases/internal/sqlitestore"
	"leases/postgres"
	"leases/session"
	"leases/sqlite"
	"leases/tests/history"
)

// WorkerEnv names the environment variable that carries a worker's
// WorkerConfig, as JSON, to the re-executed test binary.
const WorkerEnv = "LEASES_CHAOS_WORKER"

// WorkerConfig is what a worker process is told when it starts.
type WorkerConfig struct {
	// Holder is the name the worker holds leases under: one per
	// process, so that a restarted worker is a new holder.
	Holder string `json:"holder"`
	// Lessor is the SQLite file every worker shares for the leases,
	// unless Etcd names a cluster.
	Lessor string `json:"lessor,omitempty"`
	// Etcd, when set, are the client endpoints of the etcd cluster that
	// is the lessor instead: every worker talks to all of them, through
	// a store with etcd.Options' defaults.
	Etcd []string `json:"etcd,omitempty"`
	// Dialect and DSN are the worker's own database, where the fence
	// table and the business rows are ("pgx" or "sqlite" driver).
	Dialect fence.Dialect `json:"dialect"`
	DSN     string        `json:"dsn"`
	// Resources are the jobs the workers contend for.
	Resources []string `json:"resources"`
	// TTL is the sessions' time-to-live; TxPerTenure how many
	// transactions a worker runs in each tenure.
	TTL         time.Duration `json:"ttl"`
	TxPerTenure int           `json:"tx_per_tenure"`
	// Work is the most a worker works (under the session's context)
	// before each transaction: the work of a job, during which only the
	// session's own timer can tell it that its lease may be lost.
	Work time.Duration `json:"work"`
	// Seed seeds the worker's choice of resources.
	Seed uint64 `json:"seed"`
	// Guarded runs the path of docs/postgres.md instead: the leases in
	// the worker's own PostgreSQL database on the server's clock, and
	// every transaction admitted by the store's Tenure (see
	// servertime.go). Lessor is then unused.
	Guarded bool `json:"guarded,omitempty"`
}

// Driver is the database/sql driver name for d.
func Driver(d fence.Dialect) string {
	if d == fence.PostgreSQL {
		return "pgx"
	}
	return "sqlite"
}

// The business tables: one row per admitted transaction, numbered per
// resource by a counter that the same transaction increments while it
// holds the fence row, so that the numbers are the commit order.
const (
	rowsTable     = "chaos_rows"
	countersTable = "chaos_counters"
)

// Schema is the business tables' DDL, one statement each.
func Schema() []string {
	return []string{
		`CREATE TABLE ` + countersTable + ` (resource TEXT PRIMARY KEY, seq BIGINT NOT NULL)`,
		`CREATE TABLE ` + rowsTable + ` (resource TEXT NOT NULL, seq BIGINT NOT NULL, epoch BIGINT NOT NULL,
			writer TEXT NOT NULL, op TEXT NOT NULL UNIQUE, PRIMARY KEY (resource, seq))`,
	}
}

// statements of one dialect: the next number of a resource's counter, a
// row's insert, and the counter as it stands.
type statements struct{ next, insert, count string }

func statementsFor(d fence.Dialect) statements {
	if d == fence.PostgreSQL {
		return statements{
			next:   `UPDATE ` + countersTable + ` SET seq = seq + 1 WHERE resource = $1 RETURNING seq`,
			insert: `INSERT INTO ` + rowsTable + ` (resource, seq, epoch, writer, op) VALUES ($1, $2, $3, $4, $5)`,
			count:  `SELECT seq FROM ` + countersTable + ` WHERE resource = $1`,
		}
	}
	return statements{
		next:   `UPDATE ` + countersTable + ` SET seq = seq + 1 WHERE resource = ?1 RETURNING seq`,
		insert: `INSERT INTO ` + rowsTable + ` (resource, seq, epoch, writer, op) VALUES (?1, ?2, ?3, ?4, ?5)`,
		count:  `SELECT seq FROM ` + countersTable + ` WHERE resource = ?1`,
	}
}

// worker is one worker process: its configuration, its output to the
// controller and its input from it.
type worker struct {
	cfg     WorkerConfig
	sql     statements
	rng     *rand.Rand
	rec     *history.Recorder // its records, as JSON lines on its standard output
	answers <-chan string     // the controller's answers to "at"; closed when its input ends
	// committing is set while a transaction of a tenure commits, so that
	// only those commits are announced; backend is the PostgreSQL backend
	// that runs the transaction.
	committing atomic.Bool
	backend    atomic.Int64
	// live is the lessor on the server's clock, in the guarded variant.
	live leases.Lessor
	// tenures is the store whose tenures guard the guarded variant's
	// transactions.
	tenures *postgres.Store
	// committingOp is the OpID of the transaction whose COMMIT is
	// announced, for the controller to look for its row; cutTx ends
	// that transaction's context (AnswerCut).
	committingOp atomic.Pointer[string]
	cutTx        atomic.Pointer[context.CancelCauseFunc]
	// lastAnswer is the controller's last answer to an "at".
	lastAnswer atomic.Value
	// On etcd: acquiring is set while the recorder's Acquire runs, so
	// that an acquire's transaction that writes is announced ("grant-sent")
	// as it is sent; after the controller's AnswerGiveUp there, the
	// current Wait's context (waitCancel) ends as the answer comes back.
	acquiring  atomic.Bool
	waitCancel atomic.Pointer[context.CancelCauseFunc]
}

// AnswerGiveUp is the controller's answer to "grant-sent": the worker's
// Wait is given up (its context ends, as a caller's that stopped
// waiting) while the acquire's answer is on its way back, and the answer
// is lost: the grant took effect (if its compare held) and Wait's
// context has ended (issue 20).
const AnswerGiveUp = "give-up"

// errGaveUp is the cause of a Wait's context that AnswerGiveUp ended.
var errGaveUp = errors.New("the caller gave up as its grant's answer came back")

// RunWorker is the worker role: it reads its WorkerConfig from the
// environment and runs the service path in a loop until its standard
// input ends. It returns the process's exit code.
func RunWorker() int {
	var cfg WorkerConfig
	if err := json.Unmarshal([]byte(os.Getenv(WorkerEnv)), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "chaos worker: bad configuration:", err)
		return 2
	}
	answers := make(chan string)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		defer cancel() // the controller is gone or tells every worker to end
		defer close(answers)
		lines := bufio.NewScanner(os.Stdin)
		for lines.Scan() {
			answers <- lines.Text()
		}
	}()
	w := &worker{cfg: cfg, sql: statementsFor(cfg.Dialect), rng: rand.New(rand.NewPCG(cfg.Seed, 0)),
		rec: history.NewRecorder(wallStamp, jsonLines(os.Stdout)), answers: answers}
	go w.watchStarvation()
	if err := w.run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "chaos worker:", err)
		return 1
	}
	return 0
}

func (w *worker) run(ctx context.Context) error {
	// SQLite's commit hook runs inside each commit of a connection.
	modernc.RegisterConnectionHook(func(conn modernc.ExecQuerierContext, dsn string) error {
		switch {
		case dsn == w.cfg.DSN: // the worker's own database, on SQLite
			conn.(modernc.HookRegisterer).RegisterCommitHook(func() int32 {
				if w.committing.CompareAndSwap(true, false) {
					w.at("committing")
				}
				return 0
			})
		case w.cfg.Lessor != "" && strings.HasPrefix(dsn, w.cfg.Lessor+"?"): // the lessor's file
			// When a lessor's transaction began to commit: past the
			// context's last check, where a session's end can no longer
			// stop it.
			conn.(modernc.HookRegisterer).RegisterCommitHook(func() int32 {
				w.emit(history.Record{Kind: "lessor-commit"})
				return 0
			})
		}
		return nil
	})
	db, err := w.open()
	if err != nil {
		return err
	}
	defer db.Close()
	fences, err := fence.New(db, fence.Options{Dialect: w.cfg.Dialect})
	if err != nil {
		return err
	}
	if len(w.cfg.Etcd) > 0 {
		return w.runOnEtcd(ctx, db, fences)
	}
	if w.cfg.Guarded {
		return w.runGuarded(ctx, db, fences)
	}
	// Hold the lessor's write lock open at the controller's word: an
	// acquire's transaction, after its write and before COMMIT, stops
	// every other worker's renewals while the controller pauses this one.
	sqlitestore.HookInsideTransaction = func(op string) {
		if op == "acquire-written" {
			w.at("lessor-locked")
		}
	}
	store, err := sqlite.Open(ctx, w.cfg.Lessor)
	if err != nil {
		return ignoreEnd(ctx, err)
	}
	defer func() { _ = store.Close() }()
	for ctx.Err() == nil {
		lessor := clock.Lessor(&recorder{auth: store.Authority(), w: w}, clock.Wall{})
		err := w.job(ctx, lessor, db, fences, w.cfg.Resources[w.rng.IntN(len(w.cfg.Resources))])
		switch {
		case errors.Is(err, leases.ErrStoreUnusable):
			// An unknown outcome left the store unusable: open it again,
			// as docs/service.md says.
			_ = store.Close()
			if store, err = sqlite.Open(ctx, w.cfg.Lessor); err != nil {
				return ignoreEnd(ctx, err)
			}
		case err != nil:
			w.backOff(ctx)
		}
	}
	return nil
}

// runOnEtcd runs the jobs with the etcd cluster as the lessor: one
// client of every member, and a store with etcd.Options' defaults (the
// call bound of a second), which goes on after an unknown outcome.
func (w *worker) runOnEtcd(ctx context.Context, db *sql.DB, fences *fence.Table) error {
	client, err := clientv3.New(clientv3.Config{
		Endpoints: w.cfg.Etcd,
		Logger:    zap.NewNop(),
		// When a transaction that writes is sent to a member: what the
		// SQLite lessor's commit hook tells, for the renewals' check.
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(w.sentWrites)},
	})
	if err != nil {
		return err
	}
	defer func() { _ = client.Close() }()
	auth := etcd.New(client, etcd.Options{}).Authority()
	for ctx.Err() == nil {
		lessor := clock.Lessor(&recorder{auth: auth, w: w}, clock.Wall{})
		if err := w.job(ctx, lessor, db, fences, w.cfg.Resources[w.rng.IntN(len(w.cfg.Resources))]); err != nil {
			w.backOff(ctx)
		}
	}
	return nil
}

// sentWrites records each etcd transaction that writes as it is sent,
// each attempt apart (the interceptor runs inside the client's retries):
// from then on the cluster may apply it, whatever the call's context
// does.
func (w *worker) sentWrites(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	txn, ok := req.(*etcdserverpb.TxnRequest)
	if !ok || len(txn.Success) == 0 {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	giveUp := false
	if w.acquiring.Load() {
		w.at("grant-sent")
		giveUp = w.lastAnswer.Load() == AnswerGiveUp
	}
	w.emit(history.Record{Kind: "lessor-commit"})
	err := invoker(ctx, method, req, reply, cc, opts...)
	if cancel := w.waitCancel.Load(); giveUp && cancel != nil {
		// The caller gave up while the answer was on its way back: the
		// grant took effect if etcd applied it, and the call knows only
		// that its context ended.
		(*cancel)(errGaveUp)
		return status.FromContextError(ctx.Err()).Err()
	}
	return err
}

// backOff waits after a failure of a store (a database server that is
// down, a cluster without a leader), as a service would, on a timer of
// the product.
func (w *worker) backOff(ctx context.Context) {
	_ = clock.Wall{}.Wait(ctx, clock.Wall{}.Now()+w.cfg.TTL.Milliseconds()/2)
}

// job is one job under its lease, the path of docs/service.md, each step
// recorded: wait for the lease, begin the tenure, run the transactions
// (each after a Check), close. It returns what stopped the job early, if
// it was a failure of a store.
func (w *worker) job(ctx context.Context, lessor leases.Lessor, db *sql.DB, fences *fence.Table, resource string) error {
	opts := session.Options{TTL: w.cfg.TTL}
	id := w.call(history.Record{Op: "wait", Resource: resource, Holder: w.cfg.Holder})
	// The Wait's own context: the worker's, or ended by AnswerGiveUp.
	waitCtx, giveUp := context.WithCancelCause(ctx)
	defer giveUp(nil)
	w.waitCancel.Store(&giveUp)
	s, err := session.Wait(waitCtx, lessor, resource, w.cfg.Holder, opts)
	w.waitCancel.Store(nil)
	if err != nil {
		r := history.Record{Result: resultOf(err), Err: err.Error(), CtxDone: waitCtx.Err() != nil}
		// What Wait told its caller of a lease it may hold.
		var unknown *session.OutcomeError
		if errors.As(err, &unknown) {
			r.Lease, r.Released = &unknown.Lease, unknown.Released
		}
		w.ret(id, r)
		return err
	}
	lease := s.Lease()
	w.ret(id, history.Record{Result: history.ResultOK, Lease: &lease, Deadline: s.Deadline().UnixMilli()})
	doneLogged := make(chan struct{})
	go func() {
		defer close(doneLogged)
		<-s.Done()
		// When Done was seen closed, before anything else can delay it.
		at, tick := time.Now().UnixNano(), clock.Wall{}.Now()
		r := history.Record{Kind: "done", At: at, Now: tick, Resource: resource, Epoch: s.Epoch(),
			Deadline: s.Deadline().UnixMilli(), Err: fmt.Sprint(s.Err())}
		w.emit(r)
	}()
	// The work runs under the session's context and the worker's: it
	// stops at the session's end and when the worker is told to end.
	work, cancel := context.WithCancelCause(s.Context())
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	failure := w.tenure(work, s, db, fences, resource)
	stop()
	cancel(nil)
	id = w.call(history.Record{Op: "close", Resource: resource, Holder: w.cfg.Holder, Epoch: s.Epoch()})
	err = s.Close(ctx)
	w.ret(id, history.Record{Result: resultOf(err), Err: history.ErrText(err)})
	<-doneLogged
	return failure
}

// tenure begins the tenure and runs its transactions; it returns a
// failure of the database, nil otherwise.
func (w *worker) tenure(ctx context.Context, s *session.Session, db *sql.DB, fences *fence.Table, resource string) error {
	epoch := s.Epoch()
	id := w.call(history.Record{Op: "tenure", Resource: resource, Holder: w.cfg.Holder, Epoch: epoch})
	tenure, err := w.beginTenure(ctx, s, db, fences, resource)
	w.ret(id, history.Record{Result: resultOf(err), Err: history.ErrText(err)})
	if err != nil {
		return dbFailure(err)
	}
	// What the new holder finds when its tenure has begun: the rows
	// committed so far. No transaction of an older tenure may commit a
	// row after this (the gap, closed by the tenure's observe).
	id = w.call(history.Record{Op: "count", Resource: resource, Holder: w.cfg.Holder, Epoch: epoch})
	var seen int64
	err = db.QueryRowContext(ctx, w.sql.count, resource).Scan(&seen)
	w.ret(id, history.Record{Result: resultOf(err), Err: history.ErrText(err), Seq: seen})
	if err != nil {
		return dbFailure(err)
	}
	// Each transaction does one piece of work; one that Resolve says did
	// not commit is done again, in a transaction of its own (a new OpID),
	// as a service would.
	for done, attempt := 0, 0; done < w.cfg.TxPerTenure; attempt++ {
		// The work for this transaction, under the session's context.
		if err := (clock.Wall{}).Wait(ctx, clock.Wall{}.Now()+w.rng.Int64N(w.cfg.Work.Milliseconds()+1)); err != nil {
			return nil // the session ended, or the worker was told to end
		}
		tick := clock.Wall{}.Now()
		id := w.call(history.Record{Op: "check", Resource: resource, Holder: w.cfg.Holder, Epoch: epoch, Now: tick})
		err := s.Check()
		w.ret(id, history.Record{Result: resultOf(err), Err: history.ErrText(err)})
		if err != nil || !w.at("checked") {
			return nil
		}
		tx := history.Record{Op: "tx", Resource: resource, Holder: w.cfg.Holder, Epoch: epoch,
			OpID: fmt.Sprintf("%s/%s/%d/%d", w.cfg.Holder, resource, epoch, attempt), ServerTime: w.live != nil}
		err = w.transact(ctx, tenure, tx)
		if resultOf(err) == history.ResultUnknown {
			if resolved, committed := w.resolve(ctx, tenure, err, tx); resolved {
				if committed {
					done++
				}
				continue // the tenure goes on, as a service's would
			}
		}
		if err != nil {
			return dbFailure(err)
		}
		done++
	}
	return nil
}

// transact runs the transaction tx (a "tx" call's record) in the
// tenure: it takes the resource's next number, inserts its business row,
// and announces the points where the controller may stop or cut it off.
func (w *worker) transact(ctx context.Context, tenure tenure, tx history.Record) error {
	ctx, cut := context.WithCancelCause(w.txContext(ctx))
	defer cut(nil)
	w.cutTx.Store(&cut)
	id := w.call(tx)
	var seq int64
	err := tenure.Tx(ctx, nil, func(sqlTx *sql.Tx) error {
		if err := sqlTx.QueryRowContext(ctx, w.sql.next, tx.Resource).Scan(&seq); err != nil {
			return err
		}
		if _, err := sqlTx.ExecContext(ctx, w.sql.insert, tx.Resource, seq, tx.Epoch, tx.Holder, tx.OpID); err != nil {
			return err
		}
		if w.cfg.Dialect == fence.PostgreSQL {
			// The backend that will run the COMMIT, for the controller
			// to stop.
			var pid int64
			if err := sqlTx.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
				return err
			}
			w.backend.Store(pid)
		}
		if !w.at("fenced") { // between the fence and COMMIT
			return errStop
		}
		w.emit(history.Record{Kind: "commit", ID: id})
		w.committingOp.Store(&tx.OpID)
		w.committing.Store(true)
		return nil
	})
	w.committing.Store(false)
	r := history.Record{Result: resultOf(err), Err: history.ErrText(err)}
	if err == nil {
		r.Seq = seq
	}
	w.ret(id, r)
	return err
}

// resolveTTLs is how long, in TTLs, a worker tries to resolve a
// transaction whose outcome is unknown: more than twice the longest stop
// of the controller's (2.5 TTLs, with its backend) and longer than a
// crash of the server takes to recover here (under a second), so that
// only a row held open longer than that by another transaction, or a
// server down for longer, leaves the outcome still unknown.
const resolveTTLs = 6

// resolve asks the tenure what became of the transaction tx, whose Tx
// returned txErr, an unknown outcome, as docs/service.md tells a service
// to do before it acts on it, and returns the answer (resolved false:
// still unknown). Each call is recorded; while the answer is still
// unknown (the server down, its connection lost) it asks again, after
// the back-off of a failed call, until its bound of resolveTTLs passes,
// also after the session's end (which is what most often cut the
// transaction off). Once resolved, the worker goes on with its tenure,
// and does the work again after a "not committed": a wrong one then
// shows as a row that Resolve said was not there, committed once the
// worker's next transaction has begun (which waits for it at the fence
// row), and as the work done twice.
func (w *worker) resolve(ctx context.Context, t tenure, txErr error, tx history.Record) (resolved, committed bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), resolveTTLs*w.cfg.TTL)
	defer cancel()
	for {
		id := w.call(history.Record{Op: "resolve", Resource: tx.Resource, Holder: tx.Holder, Epoch: tx.Epoch, OpID: tx.OpID})
		committed, err := t.Resolve(ctx, txErr)
		w.ret(id, history.Record{Result: resultOf(err), Err: history.ErrText(err), Committed: committed})
		if err == nil {
			return true, committed
		}
		if w.backOff(ctx); ctx.Err() != nil {
			return false, false
		}
	}
}

// open opens the worker's own database, one connection, with a way for
// the controller to hold a tenure's transaction inside its COMMIT: on
// SQLite, the commit hook (see run) runs in the commit, with the write
// lock held and nothing visible yet, past every check of the context; on
// PostgreSQL, the connection announces a COMMIT it has written, and the
// controller stops the backend (and the worker) with the COMMIT on its
// way.
func (w *worker) open() (*sql.DB, error) {
	var db *sql.DB
	if w.cfg.Dialect == fence.PostgreSQL {
		config, err := pgx.ParseConfig(w.cfg.DSN)
		if err != nil {
			return nil, err
		}
		config.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &commitConn{Conn: conn, w: w}, nil
		}
		db = stdlib.OpenDB(*config)
	} else {
		var err error
		if db, err = sql.Open("sqlite", w.cfg.DSN); err != nil {
			return nil, err
		}
	}
	db.SetMaxOpenConns(1) // one connection per worker, as one per process
	return db, nil
}

// commitConn is a connection to PostgreSQL that announces a tenure's
// COMMIT before it writes it ("sending") and once it has written it
// ("committing"). Answered AnswerCut at the first, it writes the COMMIT
// and then ends the transaction's context (the worker's cutTx).
type commitConn struct {
	net.Conn
	w *worker
}

// AnswerCut is the controller's answer to "sending" that ends the
// transaction's context right after its COMMIT was written, as a
// caller's deadline would: pgx gives the connection up (it closes it),
// and the outcome is unknown to the worker, which resolves it while its
// backend, stopped by the controller, has still to read the COMMIT.
const AnswerCut = "cut"

// errCut is the cause of a transaction's context that AnswerCut ended.
var errCut = errors.New("the controller cut the transaction off as its COMMIT went out")

func (c *commitConn) Write(p []byte) (int, error) {
	if !bytes.Contains(bytes.ToLower(p), []byte("commit")) || !c.w.committing.CompareAndSwap(true, false) {
		return c.Conn.Write(p)
	}
	at := history.Record{Kind: "at", Point: "sending", Pid: int(c.w.backend.Load()), OpID: *c.w.committingOp.Load()}
	c.w.announce(at)
	cut := c.w.lastAnswer.Load() == AnswerCut
	n, err := c.Conn.Write(p)
	switch {
	case err != nil:
	case cut:
		(*c.w.cutTx.Load())(errCut)
	default:
		at.Point = "committing"
		c.w.announce(at)
	}
	return n, err
}

// ignoreEnd is err, unless the worker was told to end (its input ended)
// meanwhile: then the error is that, and no failure.
func ignoreEnd(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// dbFailure is err if it is a failure of the database (before commit, or
// with an unknown outcome), and nil for a refusal, the session's end, or
// the controller's stop, after which the worker goes on at once.
func dbFailure(err error) error {
	switch resultOf(err) {
	case history.ResultFailed, history.ResultUnknown:
		return err
	}
	return nil
}

// at announces that the worker reached point and waits for the
// controller's answer: true to go on, false to stop (also when the
// controller is gone).
func (w *worker) at(point string) bool {
	return w.announce(history.Record{Kind: "at", Point: point})
}

func (w *worker) announce(r history.Record) bool {
	w.emit(r)
	answer, ok := <-w.answers
	w.lastAnswer.Store(answer)
	return ok && (answer == "go" || answer == AnswerStale)
}

// Starvation is how the worker tells a late timer of the library's from
// a process that got no CPU: a reference timer fires every starvationTick,
// and the worker records how late it fired, all of it. A tick late by more
// than stallMin is a span of its own, exactly from when it was due to when
// it fired: the process ran none of its timers in between (the machine did
// not run it, or it was stopped). Smaller lateness, which a process that
// runs all the time sees too (the runtime's timer granularity: about 0.3
// ms a tick, idle, on the two-core machine of docs/reliability.md; the
// session's timer has it too), is summed and spread over spans of
// starvedFlush. Left out, the small lateness added up to a fifth of a
// window; spread with a stall over one span of up to starvedFlush, as
// before, a stall at the span's end counted only in part in a window that
// began inside it. A stopped process, and one that a busy machine did not
// schedule, see every timer fire late alike; the session's timer being late
// while the reference's was not is the library's fault.
const (
	starvationTick = 5 * time.Millisecond
	stallMin       = time.Millisecond
	starvedFlush   = 100 * time.Millisecond
)

// watchStarvation runs the reference timer for the life of the process.
func (w *worker) watchStarvation() {
	meter := starvationMeter{since: time.Now()}
	for {
		due := time.Now().Add(starvationTick)
		timer := time.NewTimer(starvationTick)
		<-timer.C
		for _, r := range meter.tick(due, time.Now()) {
			w.emit(r)
		}
	}
}

// starvationMeter turns the reference timer's ticks into "starved"
// records.
type starvationMeter struct {
	small time.Duration // the small lateness since since, not recorded yet
	since time.Time
}

// tick takes a tick that was due at due and fired at fired, and returns
// the records it completes.
func (m *starvationMeter) tick(due, fired time.Time) []history.Record {
	starved := func(from, until time.Time, late time.Duration) history.Record {
		return history.Record{Kind: "starved", At: from.UnixNano(), Until: until.UnixNano(), Late: late.Nanoseconds()}
	}
	var done []history.Record
	late := fired.Sub(due)
	if late > stallMin {
		if m.small > 0 {
			done = append(done, starved(m.since, due, m.small))
		}
		done = append(done, starved(due, fired, late))
		m.small, m.since = 0, fired
		return done
	}
	m.small += late
	if fired.Sub(m.since) >= starvedFlush {
		done = append(done, starved(m.since, fired, m.small))
		m.small, m.since = 0, fired
	}
	return done
}

// call records an operation's invocation and returns its id.
func (w *worker) call(r history.Record) int64 { return w.rec.Call(r) }

// ret records the return of operation id.
func (w *worker) ret(id int64, r history.Record) { w.rec.Return(id, r) }

// emit records r, of another kind than a call or a return.
func (w *worker) emit(r history.Record) { w.rec.Emit(r) }

// wallStamp is a chaos worker's stamp: the wall clock (time.Now, which
// every process on the machine reads alike) and clock.Wall's tick.
func wallStamp() (t, tick int64) { return time.Now().UnixNano(), clock.Wall{}.Now() }

// jsonLines writes each record as one line on out; a worker that cannot
// says why and exits.
func jsonLines(out io.Writer) func(history.Record) {
	enc := json.NewEncoder(out)
	return func(r history.Record) {
		if err := enc.Encode(r); err != nil && !errors.Is(err, io.ErrClosedPipe) {
			fmt.Fprintln(os.Stderr, "chaos worker: write:", err)
			os.Exit(1)
		}
	}
}

// errStop is what a worker's transaction returns when the controller
// answers "stop" inside it: it rolls back.
var errStop = errors.New("stopped by the controller")

// resultOf names what err says happened: history.ResultOf, or the
// controller's stop.
func resultOf(err error) string {
	if errors.Is(err, errStop) {
		return history.ResultStopped
	}
	return history.ResultOf(err)
}

// recorder is an authority that records every call it passes on to the
// real one, with the tick the caller's clock gave it.
type recorder struct {
	auth leases.Authority
	w    *worker
}

var _ leases.Authority = (*recorder)(nil)

func (r *recorder) Acquire(ctx context.Context, resource, holder string, now, ttl int64) (leases.Lease, error) {
	id := r.w.call(history.Record{Op: "acquire", Resource: resource, Holder: holder, Now: now, TTL: ttl})
	r.w.acquiring.Store(true)
	lease, err := r.auth.Acquire(ctx, resource, holder, now, ttl)
	r.w.acquiring.Store(false)
	r.w.ret(id, history.LeaseReturn(lease, err))
	return lease, err
}

func (r *recorder) Renew(ctx context.Context, held leases.Lease, now, ttl int64) (leases.Lease, error) {
	id := r.w.call(history.Record{Op: "renew", Resource: held.Resource, Holder: held.Holder, Epoch: held.Epoch, Now: now, TTL: ttl})
	lease, err := r.auth.Renew(ctx, held, now, ttl)
	r.w.ret(id, history.LeaseReturn(lease, err))
	return lease, err
}

func (r *recorder) Release(ctx context.Context, held leases.Lease, now int64) error {
	id := r.w.call(history.Record{Op: "release", Resource: held.Resource, Holder: held.Holder, Epoch: held.Epoch, Now: now})
	err := r.auth.Release(ctx, held, now)
	r.w.ret(id, history.LeaseReturn(leases.Lease{}, err))
	return err
}

func (r *recorder) Lease(ctx context.Context, resource string, now int64) (leases.Lease, bool, error) {
	id := r.w.call(history.Record{Op: "holder", Resource: resource, Now: now})
	lease, live, err := r.auth.Lease(ctx, resource, now)
	r.w.ret(id, history.HolderReturn(lease, live, err))
	return lease, live, err
}

// Live is the authority's, unrecorded: the workers never list.
func (r *recorder) Live(ctx context.Context, now int64, resources ...string) ([]leases.Lease, error) {
	return r.auth.Live(ctx, now, resources...)
}

func (r *recorder) Changed(ctx context.Context, resource string) (<-chan struct{}, error) {
	return r.auth.Changed(ctx, resource)
}
