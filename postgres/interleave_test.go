package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"leases"
	"leases/fence"
	"leases/internal/rules"
	"leases/testkit/fencetest"
)

// Every order of two READ COMMITTED transactions' statements: begin, the
// fence's Write, the business row (only if the fence accepted), and commit
// or rollback. A statement that waits on the other transaction's row
// lock runs on in its goroutine while the schedule goes on with the other
// transaction; that one's commit or rollback releases it. Checked for
// every schedule, with the committed fence read after every statement:
//   - the fence decided on the latest committed row: its outcome and
//     record are rules.Write's over the row committed when the statement
//     ran (for a statement that waited: once the other transaction ended);
//   - the committed fence never goes down;
//   - a transaction never commits an accepted write after one with a
//     higher epoch committed, and at most one value commits per epoch;
//   - the fence row and the business rows are those of the committed
//     accepted writes.
func TestInterleavingsReadCommitted(t *testing.T) {
	ctx := fencetest.Context(t)
	db := database(t, 0)
	table := fencetest.Setup(t, db, "fence_interleave")
	monitor := connect(t, db)
	var conns [2]*sql.Conn
	var pids [2]int
	for i := range conns {
		conns[i] = connect(t, db)
		pids[i] = backendPID(t, conns[i])
	}
	schedules, blocked := 0, 0
	var example *schedule // the first in which the lower epoch waited for the higher
	for _, epochs := range [][2]int64{{1, 2}, {2, 2}} {
		for _, order := range orders(4, 4) {
			for _, ends := range [][2]bool{{true, true}, {true, false}, {false, true}, {false, false}} {
				s := &schedule{t: t, ctx: ctx, db: db, table: table, monitor: monitor}
				for i := range s.txs {
					s.txs[i] = &transaction{name: string(rune('A' + i)), epoch: epochs[i], commit: ends[i], conn: conns[i], pid: pids[i]}
					s.txs[i].value = fmt.Sprintf("%s's at %d", s.txs[i].name, epochs[i])
				}
				s.resource = fmt.Sprintf("epochs %v, order %s, commit %v", epochs, order, ends)
				s.run(order)
				schedules++
				if s.blocked {
					blocked++
					if example == nil && epochs[0] < epochs[1] && s.txs[0].decidedOn.found {
						example = s
					}
				}
				if t.Failed() {
					t.Fatalf("schedule %q:\n%s", s.resource, strings.Join(s.log, "\n"))
				}
			}
		}
	}
	t.Logf("%d schedules, %d of them with a statement that waited for the other transaction", schedules, blocked)
	if example != nil {
		t.Logf("for example, %s:\n%s", example.resource, strings.Join(example.log, "\n"))
	}
	if blocked == 0 {
		t.Error("no statement ever waited: the schedules do not exercise the row lock")
	}
}

// orders returns every sequence of a A's and b B's.
func orders(a, b int) []string {
	if a == 0 || b == 0 {
		return []string{strings.Repeat("A", a) + strings.Repeat("B", b)}
	}
	var all []string
	for _, rest := range orders(a-1, b) {
		all = append(all, "A"+rest)
	}
	for _, rest := range orders(a, b-1) {
		all = append(all, "B"+rest)
	}
	return all
}

// connect takes one connection of db for the test, so that a transaction
// stays on a backend whose pid is known.
func connect(t *testing.T, db fencetest.DB) *sql.Conn {
	t.Helper()
	conn, err := db.Conn(fencetest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// transaction is one of a schedule's two transactions.
type transaction struct {
	name     string
	epoch    int64
	value    string
	commit   bool // how it ends: commit, or rollback
	conn     *sql.Conn
	pid      int // conn's server process
	tx       *sql.Tx
	next     int        // its next step: begin, fence, business, end
	waiting  chan error // a step that waits for the other's row lock
	deferred int        // steps the order gave it while it was waiting
	result   leases.WriteResult
	// decidedOn is the committed row the fence's statement decided on.
	decidedOn *committed
	// committedAt counts the statements completed when its Commit
	// returned nil; 0 when it did not commit.
	committedAt int
}

// committed is the fence's committed row, as another connection reads it.
type committed struct {
	record leases.Record
	found  bool
}

type schedule struct {
	t        *testing.T
	ctx      context.Context
	db       fencetest.DB
	table    *fence.Table
	monitor  *sql.Conn
	resource string
	txs      [2]*transaction
	steps    int       // statements completed so far
	last     committed // the committed fence after the last statement
	fence    []int64   // the committed fence after every statement
	blocked  bool      // a statement waited for the other transaction
	log      []string  // what happened, for a failure's message
}

// run plays the order, one letter per statement of that transaction.
func (s *schedule) run(order string) {
	defer s.abandon()
	for _, letter := range order {
		x := s.txs[letter-'A']
		if x.waiting != nil {
			x.deferred++ // it runs once the other transaction has ended
			continue
		}
		s.start(x)
	}
	for _, x := range s.txs {
		if x.next < 4 || x.waiting != nil {
			s.t.Errorf("transaction %s did not finish: step %d, waiting %v", x.name, x.next, x.waiting != nil)
		}
	}
	s.check()
}

// start runs x's next statement. If it waits for the other transaction's
// lock, it is left running; when it completes at once, or x's end
// released the other transaction's waiting statement, the schedule goes
// on.
func (s *schedule) start(x *transaction) {
	before := s.last // nothing commits but a transaction's end, and ends do not wait
	step := x.next
	x.next++
	done := make(chan error, 1)
	go func() { done <- s.step(x, step) }()
	if !s.await(x, done) {
		s.blocked = true
		s.logf("%s %s waits for the other transaction", x.name, x.describe(step))
		x.waiting = done
		return
	}
	if step == 1 {
		x.decidedOn = &before
	}
	s.completed(x, step)
	if step == 3 {
		s.release(s.other(x))
	}
}

// release lets y's waiting statement complete, now that the other
// transaction has ended, and runs the steps the order gave y meanwhile.
func (s *schedule) release(y *transaction) {
	if y.waiting == nil {
		return
	}
	select {
	case err := <-y.waiting:
		y.waiting = nil
		if err != nil {
			s.t.Fatalf("%s %s: %v", y.name, y.describe(y.next-1), err)
		}
	case <-s.ctx.Done():
		s.t.Fatalf("%s %s still waits after the other transaction ended", y.name, y.describe(y.next-1))
	}
	if y.next-1 == 1 {
		after := s.last // the row it decided on: the other's end is all that happened since
		y.decidedOn = &after
	}
	s.completed(y, y.next-1)
	for ; y.deferred > 0; y.deferred-- {
		s.start(y)
	}
}

// await waits until the statement is done (true) or its backend waits
// for a lock held by the other transaction (false).
func (s *schedule) await(x *transaction, done chan error) bool {
	for {
		select {
		case err := <-done:
			if err != nil {
				s.t.Fatalf("%s: %v", x.name, err)
			}
			return true
		default:
		}
		var waits bool
		if err := s.monitor.QueryRowContext(s.ctx, `SELECT cardinality(pg_blocking_pids($1)) > 0`, x.pid).Scan(&waits); err != nil {
			s.t.Fatal(err)
		}
		if waits {
			return false
		}
	}
}

// step runs statement step of x.
func (s *schedule) step(x *transaction, step int) error {
	var err error
	switch step {
	case 0:
		x.tx, err = x.conn.BeginTx(s.ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	case 1:
		x.result, err = s.table.Write(s.ctx, x.tx, s.resource, x.epoch, x.value)
	case 2:
		if x.result.Outcome == leases.Accepted {
			err = fencetest.InsertBusiness(s.ctx, s.db, x.tx, s.table, s.resource, x.epoch, x.value, int(x.name[0]))
		}
	case 3:
		if x.commit {
			return x.tx.Commit()
		}
		return x.tx.Rollback()
	}
	return err
}

// completed records x's statement step as done and the committed fence
// after it.
func (s *schedule) completed(x *transaction, step int) {
	s.steps++
	if step == 3 && x.commit {
		x.committedAt = s.steps
	}
	s.last = s.read()
	s.fence = append(s.fence, s.last.record.Epoch)
	s.logf("%s %s; committed fence %+v", x.name, x.describe(step), s.last.record)
}

func (s *schedule) other(x *transaction) *transaction {
	if s.txs[0] == x {
		return s.txs[1]
	}
	return s.txs[0]
}

// read returns the committed fence row, read by the monitor connection
// in a statement of its own.
func (s *schedule) read() committed {
	var c committed
	var valueEpoch sql.NullInt64
	var value sql.NullString
	err := s.monitor.QueryRowContext(s.ctx, `SELECT epoch, value_epoch, value FROM fence_interleave WHERE resource = $1`,
		s.resource).Scan(&c.record.Epoch, &valueEpoch, &value)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return committed{}
	case err != nil:
		s.t.Fatal(err)
	}
	c.found, c.record.ValueEpoch, c.record.Value = true, valueEpoch.Int64, value.String
	return c
}

// check holds the schedule to the rule once both transactions ended.
func (s *schedule) check() {
	t := s.t
	for i := 1; i < len(s.fence); i++ {
		if s.fence[i] < s.fence[i-1] {
			t.Errorf("the committed fence went down from %d to %d", s.fence[i-1], s.fence[i])
		}
	}
	var stored []*transaction
	for _, x := range s.txs {
		want := rules.Write(leases.Fenced, x.decidedOn.record, x.decidedOn.found, x.epoch, x.value)
		if x.result != want {
			t.Errorf("%s's fence: %+v, the rule over the committed row %+v says %+v", x.name, x.result, x.decidedOn.record, want)
		}
		if x.committedAt > 0 && x.result.Outcome == leases.Accepted {
			stored = append(stored, x)
		}
	}
	if len(stored) == 2 {
		a, b := stored[0], stored[1]
		if b.committedAt < a.committedAt {
			a, b = b, a // a committed first: the schedule runs one commit at a time
		}
		if b.epoch < a.epoch {
			t.Errorf("%s committed epoch %d after %s had committed epoch %d", b.name, b.epoch, a.name, a.epoch)
		}
		if b.epoch == a.epoch {
			t.Errorf("two values committed at epoch %d: %q and %q", a.epoch, a.value, b.value)
		}
	}
	want, wantRows := leases.Record{}, []string(nil)
	for _, x := range stored {
		wantRows = append(wantRows, fencetest.Row(x.epoch, x.value))
		if x.epoch > want.Epoch {
			want = leases.Record{Epoch: x.epoch, ValueEpoch: x.epoch, Value: x.value}
		}
	}
	if got := s.read(); got.record != want {
		t.Errorf("the table holds %+v, the committed writes left %+v", got.record, want)
	}
	slices.Sort(wantRows)
	if rows := fencetest.BusinessRows(t, s.db, s.table, s.resource); !slices.Equal(rows, wantRows) {
		t.Errorf("business rows %q, the committed accepted writes %q", rows, wantRows)
	}
}

// abandon rolls back what a failed schedule left open and waits for its
// waiting statements, so the next schedule starts on idle connections.
func (s *schedule) abandon() {
	for _, x := range s.txs {
		if x.tx != nil {
			_ = x.tx.Rollback()
		}
	}
	for _, x := range s.txs {
		if x.waiting != nil {
			<-x.waiting
		}
	}
}

func (s *schedule) logf(format string, args ...any) {
	s.log = append(s.log, fmt.Sprintf(format, args...))
}

// describe names x's statement step, and what it did once it has.
func (x *transaction) describe(step int) string {
	switch {
	case step == 0:
		return "begin"
	case step == 1 && x.decidedOn == nil:
		return fmt.Sprintf("fence write at %d", x.epoch)
	case step == 1:
		return fmt.Sprintf("fence write at %d: %s %+v", x.epoch, x.result.Outcome, x.result.Record)
	case step == 2 && x.result.Outcome != leases.Accepted:
		return "business write skipped: not accepted"
	case step == 2:
		return "business write"
	case x.commit:
		return "commit"
	}
	return "rollback"
}

// backendPID returns the server process that serves conn.
func backendPID(t *testing.T, conn *sql.Conn) int {
	var pid int
	if err := conn.QueryRowContext(context.Background(), `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	return pid
}
