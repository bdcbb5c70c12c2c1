// Package load runs many worker processes against one SQLite file at once,
// so that their transactions really contend, and checks every invariant
// over all their replies and the file afterwards.
package load

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"leases"
	"leases/internal/experiment/backend"
	"leases/internal/experiment/worker"
	"leases/sqlite"
)

// Options size a load run; zero values take the defaults. The run has
// no bound of its own: its context bounds it, since only the caller knows
// how long a run of this size may take on this machine.
type Options struct {
	Workers int // default 8
	Rounds  int // default 40
}

// Report is what a load run did and how long it took. The counts come
// from the workers' own replies; the checks that passed are listed in
// Run's comment.
type Report struct {
	Workers, Rounds                      int
	Attempts, Grants, Refusals           int
	Renewals, Releases                   int
	Accepted, Stale, Replays, Conflicts  int
	Operations                           int
	HighestEpoch                         int64
	IntegrityCheck                       string
	Wall                                 time.Duration
	OperationsPerSecond, GrantsPerSecond float64
}

// The load's lease lives two ticks; a round is three ticks.
const (
	loadTTL         = 2
	loadRoundTicks  = 3
	loadResource    = "contended-record"
	loadExpiryRound = 4 // every fourth round the holder lets its lease expire
)

// Run starts opts.Workers worker processes on one database file and
// drives them through opts.Rounds rounds. Round r starts at tick T = 3r:
//
//  1. at tick T every worker tries to acquire, all at once: N processes
//     contend for the BEGIN IMMEDIATE lock, one is granted, the rest refused;
//  2. at tick T+1, all at once, the holder writes its value, resends it (a
//     replay) and renews to T+3; every earlier holder resends a different
//     value with its old epoch (stale, or a conflict if it lands before the
//     new holder's write); every worker that never held tries to acquire
//     (refused);
//  3. at tick T+2 the holder releases, except every fourth round, when its
//     lease runs out at T+3: the next round's acquires land exactly on the
//     expiry tick.
//
// Afterwards it checks, from every worker's replies and from the database:
// granted epochs strictly increase with no duplicates; no two leases are
// live at one tick; the receiver's epoch never goes down; no epoch gets two
// values; no call failed (so no SQLITE_BUSY reached a caller); the final
// rows agree with the replies; PRAGMA integrity_check says ok. Any failure
// is an error.
func Run(ctx context.Context, opts Options) (Report, error) {
	opts = opts.withDefaults()
	dir, err := os.MkdirTemp("", "leases-load-")
	if err != nil {
		return Report{}, err
	}
	defer os.RemoveAll(dir)
	dbPath := filepath.Join(dir, "load.db")
	store, err := sqlite.Open(ctx, dbPath)
	if err != nil {
		return Report{}, err
	}
	defer store.Close()

	l := &loadRun{leases: map[int64]*leaseSpan{}}
	for i := range opts.Workers {
		w, err := worker.Start(ctx, fmt.Sprintf("W%02d", i), worker.Options{Backend: backend.SQLite{}.Name(), Address: dbPath})
		if err != nil {
			l.killAll()
			return Report{}, err
		}
		l.workers = append(l.workers, &loadWorker{Worker: w})
	}
	defer l.killAll()

	start := time.Now()
	for round := range opts.Rounds {
		if err := l.round(ctx, round); err != nil {
			return Report{}, fmt.Errorf("round %d: %w", round, err)
		}
	}
	for _, w := range l.workers {
		if err := w.Exit(ctx); err != nil {
			return Report{}, err
		}
	}
	l.report.Wall = time.Since(start)
	if err := l.check(ctx, store); err != nil {
		return l.report, err
	}
	r := &l.report
	r.Workers, r.Rounds = opts.Workers, opts.Rounds
	r.OperationsPerSecond = float64(r.Operations) / r.Wall.Seconds()
	r.GrantsPerSecond = float64(r.Grants) / r.Wall.Seconds()
	return l.report, nil
}

func (o Options) withDefaults() Options {
	if o.Workers <= 0 {
		o.Workers = 8
	}
	if o.Rounds <= 0 {
		o.Rounds = 40
	}
	return o
}

type loadRun struct {
	workers []*loadWorker
	mu      sync.Mutex // guards everything below, written by the phase goroutines
	report  Report
	leases  map[int64]*leaseSpan // by epoch
	phase   int
	// fenceByPhase is the range of receiver epochs the replies of each
	// phase saw; the receiver's epoch never goes down if every phase's
	// lowest is at least the previous phase's highest.
	fenceByPhase [][2]int64
	valueByEpoch map[int64]string
}

type loadWorker struct {
	*worker.Worker
	lease     leases.Lease // latest lease granted to this worker
	everHeld  bool
	lastValue string
}

// leaseSpan is one granted lease: live from its grant tick until its end
// (its release tick, or its expiry after the last renewal).
type leaseSpan struct {
	start, end int64
}

// round runs one round's three phases, starting at tick 3r.
func (l *loadRun) round(ctx context.Context, round int) error {
	t := int64(round * loadRoundTicks)
	holder, err := l.contend(ctx, t)
	if err != nil {
		return err
	}
	if err := l.work(ctx, holder, t+1, fmt.Sprintf("round-%d-by-%s", round, holder.Name())); err != nil {
		return err
	}
	if round%loadExpiryRound == loadExpiryRound-1 {
		return nil // the lease runs out at t+3, the next round's tick
	}
	return l.release(ctx, holder, t+2)
}

// contend has every worker try to acquire at tick t, all at once, and
// returns the one that was granted.
func (l *loadRun) contend(ctx context.Context, t int64) (*loadWorker, error) {
	var holder *loadWorker
	err := l.allAtOnce(ctx, func(w *loadWorker) error {
		granted, err := l.tryAcquire(ctx, w, t)
		if granted {
			l.mu.Lock()
			holder = w
			l.mu.Unlock()
		}
		return err
	})
	if err == nil && holder == nil {
		err = fmt.Errorf("no worker was granted the lease at tick %d", t)
	}
	return holder, err
}

// work has, at tick t and all at once, the holder write its value, resend
// it and renew; every earlier holder resend a different value with its
// old epoch; and every other worker try to acquire.
func (l *loadRun) work(ctx context.Context, holder *loadWorker, t int64, value string) error {
	return l.allAtOnce(ctx, func(w *loadWorker) error {
		switch {
		case w == holder:
			if err := l.write(ctx, w, w.lease.Epoch, value); err != nil {
				return err
			}
			if err := l.write(ctx, w, w.lease.Epoch, value); err != nil { // the retried write
				return err
			}
			renewed, err := w.Renew(ctx, w.lease, t, loadTTL)
			if err != nil {
				return err
			}
			l.count(func(r *Report) { r.Renewals++ })
			l.setEnd(renewed.Epoch, renewed.ExpiresAt)
			w.lease = renewed
			return nil
		case w.everHeld:
			return l.write(ctx, w, w.lease.Epoch, w.lastValue+"-again")
		default:
			_, err := l.tryAcquire(ctx, w, t)
			return err
		}
	})
}

// release has the holder release its lease at tick t.
func (l *loadRun) release(ctx context.Context, holder *loadWorker, t int64) error {
	if err := holder.Release(ctx, holder.lease, t); err != nil {
		return err
	}
	l.count(func(r *Report) { r.Releases++; r.Operations++ })
	l.setEnd(holder.lease.Epoch, t)
	return nil
}

// allAtOnce runs fn for every worker concurrently and waits for all: the
// workers' transactions really contend.
func (l *loadRun) allAtOnce(ctx context.Context, fn func(*loadWorker) error) error {
	l.mu.Lock()
	l.phase++
	l.mu.Unlock()
	errs := make([]error, len(l.workers))
	var wg sync.WaitGroup
	for i, w := range l.workers {
		wg.Go(func() { errs[i] = fn(w) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (l *loadRun) tryAcquire(ctx context.Context, w *loadWorker, tick int64) (bool, error) {
	lease, err := w.Acquire(ctx, loadResource, tick, loadTTL)
	l.count(func(r *Report) { r.Attempts++; r.Operations++ })
	if errors.Is(err, leases.ErrLeaseHeld) {
		l.count(func(r *Report) { r.Refusals++ })
		return false, nil
	}
	if err != nil {
		return false, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.report.Grants++
	if _, dup := l.leases[lease.Epoch]; dup {
		return true, fmt.Errorf("epoch %d granted twice", lease.Epoch)
	}
	l.leases[lease.Epoch] = &leaseSpan{start: lease.GrantedAt, end: lease.ExpiresAt}
	w.lease, w.everHeld = lease, true
	return true, nil
}

func (l *loadRun) write(ctx context.Context, w *loadWorker, epoch int64, value string) error {
	result, err := w.Write(ctx, leases.Fenced, loadResource, epoch, value)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.report.Operations++
	switch result.Outcome {
	case leases.Accepted:
		l.report.Accepted++
		if l.valueByEpoch == nil {
			l.valueByEpoch = map[int64]string{}
		}
		if earlier, ok := l.valueByEpoch[epoch]; ok && earlier != value {
			return fmt.Errorf("epoch %d accepted %q and %q", epoch, earlier, value)
		}
		l.valueByEpoch[epoch] = value
		w.lastValue = value
	case leases.Stale:
		l.report.Stale++
	case leases.Replay:
		l.report.Replays++
	case leases.Conflict:
		l.report.Conflicts++
	}
	for len(l.fenceByPhase) < l.phase {
		l.fenceByPhase = append(l.fenceByPhase, [2]int64{-1, -1})
	}
	seen := &l.fenceByPhase[l.phase-1]
	if seen[0] < 0 || result.Record.Epoch < seen[0] {
		seen[0] = result.Record.Epoch
	}
	seen[1] = max(seen[1], result.Record.Epoch)
	return nil
}

func (l *loadRun) setEnd(epoch, end int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.leases[epoch].end = end
}

func (l *loadRun) count(fn func(*Report)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fn(&l.report)
}

func (l *loadRun) killAll() {
	for _, w := range l.workers {
		w.Kill()
	}
}

// check verifies the invariants over the whole run.
func (l *loadRun) check(ctx context.Context, store *sqlite.Store) error {
	problems := append(l.leaseProblems(), l.fenceProblems()...)
	file, err := l.fileProblems(ctx, store)
	if err != nil {
		return err
	}
	if problems = append(problems, file...); len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// leaseProblems: granted epochs are 1..n with no gap, and rise with their
// grant ticks; no two leases overlap.
func (l *loadRun) leaseProblems() []string {
	epochs := slices.Sorted(maps.Keys(l.leases))
	l.report.HighestEpoch = int64(len(epochs))
	var problems []string
	for i, e := range epochs {
		if e != int64(i+1) {
			return append(problems, fmt.Sprintf("granted epochs are not 1..%d without gaps: %v", len(epochs), epochs))
		}
		if i == 0 {
			continue
		}
		prev, cur := l.leases[epochs[i-1]], l.leases[e]
		if cur.start < prev.start {
			problems = append(problems, fmt.Sprintf("epoch %d was granted at tick %d, before epoch %d at tick %d", e, cur.start, epochs[i-1], prev.start))
		}
		if cur.start < prev.end {
			problems = append(problems, fmt.Sprintf("epoch %d (from tick %d) overlaps epoch %d (until tick %d)", e, cur.start, epochs[i-1], prev.end))
		}
	}
	return problems
}

// fenceProblems: the receiver's epoch, as the replies showed it, never
// went down from one phase to the next.
func (l *loadRun) fenceProblems() []string {
	var problems []string
	highestSoFar := int64(0)
	for phase, seen := range l.fenceByPhase {
		if seen[0] < 0 {
			continue
		}
		if seen[0] < highestSoFar {
			problems = append(problems, fmt.Sprintf("phase %d saw the receiver at epoch %d after it had been at %d", phase+1, seen[0], highestSoFar))
		}
		highestSoFar = max(highestSoFar, seen[1])
	}
	return problems
}

// fileProblems: the receiver's record in the file is the last accepted
// write's, and the file is sound.
func (l *loadRun) fileProblems(ctx context.Context, store *sqlite.Store) ([]string, error) {
	record, _, err := store.Receiver(leases.Fenced).Read(ctx, loadResource)
	if err != nil {
		return nil, err
	}
	var problems []string
	highestWritten := int64(0)
	for e := range l.valueByEpoch {
		highestWritten = max(highestWritten, e)
	}
	if record.Epoch != highestWritten || record.Value != l.valueByEpoch[highestWritten] {
		problems = append(problems, fmt.Sprintf("receiver holds %+v; the replies say epoch %d with %q", record, highestWritten, l.valueByEpoch[highestWritten]))
	}
	if l.report.IntegrityCheck, err = store.IntegrityCheck(ctx); err != nil {
		return nil, err
	}
	if l.report.IntegrityCheck != "ok" {
		problems = append(problems, "integrity_check: "+l.report.IntegrityCheck)
	}
	return problems, nil
}
