package command

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"leases"
	"leases/internal/experiment/results"
	"leases/internal/experiment/scenario"
	"leases/internal/experiment/worker"
	"leases/sqlite"
)

// OpenBareDB opens path (or ":memory:") with the store's settings, IMMEDIATE
// transactions, its busy timeout, WAL and one connection, and a one-row
// table: the floor that the library's operations are measured against.
func OpenBareDB(path string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", fmt.Sprintf("%s?_txlock=immediate&_pragma=busy_timeout(%d)&_pragma=journal_mode(WAL)",
		path, sqlite.DefaultBusyTimeout.Milliseconds()))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE TABLE IF NOT EXISTS bare (k TEXT PRIMARY KEY, v INTEGER NOT NULL) STRICT`); err != nil {
		return nil, errors.Join(err, db.Close())
	}
	return db, nil
}

// BareUpsert is the floor's statement: one row, inserted or replaced.
const BareUpsert = `INSERT INTO bare (k, v) VALUES (?, ?) ON CONFLICT (k) DO UPDATE SET v = excluded.v`

// floors are what the command's parts cost at the least on this machine.
type floors struct {
	reexec      time.Duration // start this binary, one handshake, exit
	fileWrite   time.Duration // BEGIN IMMEDIATE, upsert, COMMIT on a file in WAL mode
	fileRead    time.Duration // BEGIN IMMEDIATE, select, COMMIT on that file
	memoryWrite time.Duration // BEGIN IMMEDIATE, upsert, COMMIT in memory
}

func measureFloors(ctx context.Context) (floors, error) {
	var f floors
	var err error
	if f.reexec, err = average(8, func() error { return worker.Bare(ctx) }); err != nil {
		return f, fmt.Errorf("re-exec floor: %w", err)
	}
	dir, err := os.MkdirTemp("", "leases-floors-")
	if err != nil {
		return f, err
	}
	defer os.RemoveAll(dir)
	file, err := OpenBareDB(filepath.Join(dir, "floor.db"))
	if err != nil {
		return f, err
	}
	defer file.Close()
	memory, err := OpenBareDB(":memory:")
	if err != nil {
		return f, err
	}
	defer memory.Close()
	i := 0
	upsert := func(db *sql.DB) func() error {
		return func() error {
			i++
			return bareTransaction(ctx, db, func(tx *sql.Tx) error { _, err := tx.Exec(BareUpsert, "k", i); return err })
		}
	}
	read := func() error {
		return bareTransaction(ctx, file, func(tx *sql.Tx) error { var v int; return tx.QueryRow(`SELECT v FROM bare WHERE k = 'k'`).Scan(&v) })
	}
	if f.fileWrite, err = average(64, upsert(file)); err != nil {
		return f, err
	}
	if f.fileRead, err = average(64, read); err != nil {
		return f, err
	}
	if f.memoryWrite, err = average(2000, upsert(memory)); err != nil {
		return f, err
	}
	return f, nil
}

func average(n int, fn func() error) (time.Duration, error) {
	start := time.Now()
	for range n {
		if err := fn(); err != nil {
			return 0, err
		}
	}
	return time.Since(start) / time.Duration(n), nil
}

func bareTransaction(ctx context.Context, db *sql.DB, fn func(*sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return errors.Join(err, tx.Rollback())
	}
	return tx.Commit()
}

// fileTransactions counts a scenario's transactions on its file, from its
// steps: those that commit a change, and those that change nothing.
func fileTransactions(sc scenario.Scenario) (writes, reads int) {
	actors := map[string]bool{}
	writes = 2 // the controller creates the two tables
	for _, s := range sc.Steps {
		actors[s.Actor] = true
		reads++ // the controller reads the receiver after every step
		switch {
		case s.Operation == scenario.OpExit:
		case s.Operation == scenario.OpRead, s.Outcome == scenario.OutcomeRefused,
			s.Outcome == string(leases.Replay), s.Outcome == string(leases.Conflict), s.Outcome == string(leases.Stale):
			reads++
		default:
			writes++
		}
	}
	reads += 2*len(actors) + 1 // each worker's open finds the tables there; the final read
	return writes, reads
}

// printTimings writes the run's time, part by part: on SQLite next to the
// floors it measures on the spot, on any other backend as measured (its
// floors are its own benchmarks').
func printTimings(ctx context.Context, w io.Writer, doc *results.Results, stats *RunStats, total time.Duration) error {
	f, err := measureFloors(ctx)
	if err != nil {
		return err
	}
	line := func(what string, count int, each, floor, measured time.Duration) {
		fmt.Fprintf(w, "  %-34s %7s %10s %10s %10s %s\n", what, countOrBlank(count), ms(each), ms(floor), ms(measured), ratio(measured, floor))
	}
	fmt.Fprintln(w, "run-experiment: timings on this machine (never part of the results)")
	fmt.Fprintf(w, "  %-34s %7s %10s %10s %10s %s\n", "part", "count", "floor each", "floor", "measured", "ratio")
	// The backends run side by side: what is left of the total is what
	// the longest of them did not take.
	longest, floors := time.Duration(0), time.Duration(0)
	for i, b := range stats.Backends {
		longest = max(longest, b.Start+b.Scenarios+b.Exploration)
		fmt.Fprintf(w, "  %s\n", b.Backend)
		if b.Start > time.Millisecond {
			line("start (a cluster)", 0, 0, 0, b.Start)
		}
		if b.Backend != "sqlite" {
			line("worker processes started", b.Workers, 0, 0, 0)
			line("scenarios", 0, 0, 0, b.Scenarios)
			line("exploration steps", b.Explore.StepsRun, 0, 0, b.Exploration)
			continue
		}
		var writes, reads int
		for _, sc := range doc.Backends[i].Scenarios {
			wr, rd := fileTransactions(sc)
			writes, reads = writes+wr, reads+rd
		}
		scenarioFloor := time.Duration(b.Workers)*f.reexec + time.Duration(writes)*f.fileWrite + time.Duration(reads)*f.fileRead
		exploreFloor := time.Duration(b.Explore.StepsRun) * f.memoryWrite
		floors += scenarioFloor + exploreFloor
		line("worker processes started", b.Workers, f.reexec, time.Duration(b.Workers)*f.reexec, 0)
		line("file transactions that commit", writes, f.fileWrite, time.Duration(writes)*f.fileWrite, 0)
		line("file transactions that only read", reads, f.fileRead, time.Duration(reads)*f.fileRead, 0)
		line("scenarios", 0, 0, scenarioFloor, b.Scenarios)
		line("exploration steps (in memory)", b.Explore.StepsRun, f.memoryWrite, exploreFloor, b.Exploration)
		fmt.Fprintf(w, "  %-34s %7d (rollbacks to a branch point) and %d distinct states (one snapshot each)\n",
			"  of which restores", b.Explore.Restores, b.Explore.States)
	}
	line("encoding, checking, writing", 0, 0, 0, total-longest)
	line("total (floors: SQLite's parts)", 0, 0, floors, total)
	return nil
}

func countOrBlank(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprint(n)
}

func ms(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return fmt.Sprintf("%.3f ms", float64(d.Microseconds())/1000)
}

func ratio(measured, floor time.Duration) string {
	if measured == 0 || floor == 0 {
		return ""
	}
	return fmt.Sprintf("%.2fx", float64(measured)/float64(floor))
}
