package fencetest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"leases"
	"leases/fence"
)

// Load is a run of many writers at once on one fence table, each on a
// database handle of its own.
type Load struct {
	// DBs are the writers' handles on one database, one writer each.
	DBs []DB
	// Table names the fence table to create and use.
	Table string
	// Transactions is how many transactions each writer runs.
	Transactions int
	// Isolation is the writers' transaction isolation level.
	Isolation sql.IsolationLevel
	// ReadFirst makes each transaction read the business table before
	// it reaches the fence, as a transaction that looks before it acts
	// does: in SQLite a DEFERRED transaction must then upgrade.
	ReadFirst bool
	// Expected reports the errors the database may answer under this
	// load, which end the transaction without a commit (a serialization
	// failure, SQLITE_BUSY); any other error fails the test.
	Expected func(error) bool
}

// call is one writer's transaction as the writer saw it. The clock is a
// counter shared by all writers: began is taken before BeginTx, the
// commit's ticks before Commit is called and after it returned, so that
// "a committed before b began" holds in the database too when
// a.committed < b.began.
type call struct {
	writer   int
	resource string
	step
	result                     leases.WriteResult
	err                        error // expected errors only: no commit
	began, commitAt, committed int64 // committed is 0 unless Commit returned nil
	rolledBack                 bool
	seenAt                     int64 // when the writer read the committed fence, after its end
	seen                       leases.Record
}

// stored reports whether the call's change is in the database.
func (c call) stored() bool { return c.committed > 0 && c.result.Outcome == leases.Accepted }

// Concurrent runs the load: each writer offers epochs around the current
// one (a new holder now and then, stale holders often, replays of the
// same value and conflicting ones at the same epoch, observes, admits of
// a tenure's transactions), stores a business row when the fence accepts
// a write or admits a transaction, and commits (or, now and then, rolls
// back). Then it checks, from what the writers saw and what the
// database holds:
//   - no accepted write, observe or admit with an epoch below one
//     committed before its transaction began, and no transaction
//     committing an accepted call after a higher epoch committed before
//     its commit started;
//   - at most one value committed per resource and epoch;
//   - the fence never goes down: every transaction, and every read after
//     a commit, sees at least every epoch committed before it began;
//   - the fence row and the business rows are what the committed
//     accepted calls left, no more and no less.
//
// A transaction that ends with an expected error is retried, and counted:
// Concurrent returns how many there were.
func Concurrent(t *testing.T, load Load) (failed int) {
	ctx := Context(t)
	table := Setup(t, load.DBs[0], load.Table)
	resources := []string{"r0", "r1"}
	latest := map[string]*atomic.Int64{}
	for _, r := range resources {
		latest[r] = new(atomic.Int64)
		latest[r].Store(1)
	}
	var clock atomic.Int64
	calls := make([][]call, len(load.DBs))
	var wg sync.WaitGroup
	for w, db := range load.DBs {
		// Each writer's table is on its own handle, as each process's is.
		own, err := fence.New(db.DB, fence.Options{Dialect: db.Dialect, Table: table.Name()})
		if err != nil {
			t.Fatal(err)
		}
		via := Fence{own}
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for k := range load.Transactions {
				resource := resources[rng.IntN(len(resources))]
				step := pickStep(rng, latest[resource], w, k)
				for { // as the fence's users must: retry after an expected error
					c := call{writer: w, resource: resource, step: step}
					err := run(ctx, db, table, via, load, &c, &clock)
					if err != nil && (ctx.Err() != nil || load.Expected == nil || !load.Expected(err)) {
						t.Errorf("writer %d, %s on %s: %v", w, describe(c.step), c.resource, err)
						return
					}
					c.err = err
					calls[w] = append(calls[w], c)
					if err == nil {
						break
					}
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return 0
	}
	all := tally(t, calls)
	for _, r := range resources {
		checkHistory(t, load.DBs[0], table, r, all)
	}
	for _, c := range all {
		if c.err != nil {
			failed++
		}
	}
	return failed
}

// pickStep draws writer w's k-th call: one time in four a new holder,
// with the next epoch, that observes it or writes at once; otherwise a
// holder of the current epoch or of one or two below it, that writes
// (a value that repeats per epoch, so that replays occur, or one of its
// own, so that conflicts do) or, now and then, observes late.
func pickStep(rng *rand.Rand, latest *atomic.Int64, w, k int) step {
	if rng.IntN(4) == 0 {
		epoch := latest.Add(1)
		if rng.IntN(2) == 0 {
			return observe(epoch)
		}
		return write(epoch, fmt.Sprintf("v%d", epoch))
	}
	epoch := max(1, latest.Load()-int64(rng.IntN(3)))
	switch rng.IntN(10) {
	case 0:
		return observe(epoch)
	case 8, 9: // a transaction of a tenure, one of many
		return admit(epoch, fmt.Sprintf("a%d-%d", w, k))
	case 1, 2, 3:
		return write(epoch, fmt.Sprintf("v%d", epoch))
	default:
		return write(epoch, fmt.Sprintf("w%d-%d", w, k))
	}
}

// run is one writer's transaction: the fence, the business row if the
// fence accepted, then commit (rollback one time in eight, and always
// when the fence refused: nothing to keep). Afterwards the writer reads
// the committed fence, in a transaction of its own.
func run(ctx context.Context, db DB, table *fence.Table, via Fence, load Load, c *call, clock *atomic.Int64) error {
	c.began = clock.Add(1)
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: load.Isolation})
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := transaction(ctx, db, tx, table, via, load, c); err != nil {
		return errors.Join(err, ignoreDone(tx.Rollback()))
	}
	if c.result.Outcome != leases.Accepted || c.began%8 == 0 {
		c.rolledBack = true
		if err := tx.Rollback(); err != nil {
			return fmt.Errorf("rollback: %w", err)
		}
	} else {
		c.commitAt = clock.Add(1)
		if err := tx.Commit(); err != nil {
			// Only expected errors pass, and those (a serialization
			// failure, SQLITE_BUSY) are known not to have committed.
			return fmt.Errorf("commit: %w", err)
		}
		c.committed = clock.Add(1)
	}
	c.seenAt = clock.Add(1)
	return readSeen(ctx, db, via, load, c)
}

func transaction(ctx context.Context, db DB, tx *sql.Tx, table *fence.Table, via Fence, load Load, c *call) error {
	if load.ReadFirst {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM `+table.Name()+`_business`).Scan(&n); err != nil {
			return fmt.Errorf("read first: %w", err)
		}
	}
	var err error
	if c.result, err = c.step.run(ctx, via, tx, c.resource); err != nil {
		return err
	}
	if c.result.Outcome == leases.Accepted && !c.observe { // a write, or an admitted transaction
		return InsertBusiness(ctx, db, tx, table, c.resource, c.epoch, c.value, c.writer)
	}
	return nil
}

// readSeen reads the committed fence in a transaction of its own, retried
// while the database answers an expected error.
func readSeen(ctx context.Context, db DB, via Fence, load Load, c *call) error {
	for {
		tx, err := db.BeginTx(ctx, nil)
		if err == nil {
			c.seen, _, err = via.Read(ctx, tx, c.resource)
			err = errors.Join(err, tx.Rollback())
		}
		if err == nil || ctx.Err() != nil || load.Expected == nil || !load.Expected(err) {
			return err
		}
	}
}

func ignoreDone(err error) error {
	if errors.Is(err, sql.ErrTxDone) {
		return nil
	}
	return err
}

// tally logs what the load did and fails the test if it did not reach
// every outcome: a test whose writers never collide shows nothing.
func tally(t *testing.T, calls [][]call) []call {
	t.Helper()
	var all []call
	counts := map[string]int{}
	for _, writer := range calls {
		for _, c := range writer {
			all = append(all, c)
			kind := "write"
			switch {
			case c.observe:
				kind = "observe"
			case c.admit:
				kind = "admit"
			}
			switch {
			case c.err != nil:
				counts["failed"]++
			case c.committed > 0:
				counts[kind+" "+string(c.result.Outcome)+" committed"]++
			default:
				counts[kind+" "+string(c.result.Outcome)]++
			}
		}
	}
	t.Logf("%d transactions: %v", len(all), counts)
	for _, want := range []string{"write accepted committed", "write stale", "write conflict", "observe accepted committed", "observe stale", "admit accepted committed", "admit stale"} {
		if counts[want] == 0 {
			t.Errorf("no %q among the outcomes: the load does not exercise the fence", want)
		}
	}
	return all
}
