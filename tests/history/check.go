package history

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// Check is one of the safety properties, checked on a history: it
// returns a line for each violation it finds. A check that looks at
// calls a history does not have (a session's, a receiver's, the guarded
// variant's) finds nothing in it.
type Check struct {
	Name string
	Run  func(h *History) []string
}

// Checks are the properties every run must keep, beside porcupine's.
// doneTolerance is how late a session's Done may close after its
// Deadline in a process that was not stopped meanwhile, beyond the time
// in which the process could run no timer at all (its reference timer's
// starvation).
func Checks(doneTolerance time.Duration) []Check {
	return []Check{
		// The authority.
		{"every epoch granted once", epochsGrantedOnce},
		{"the authority's tenures agree with every answer", tenures},
		{"no call refused as invalid input", noInvalidInput},
		// The fenced receiver.
		{"every receiver answer agrees with its record, one value per epoch", receiverAnswers},
		{"the receiver's fence never goes down, and nothing is accepted below it", receiverFence},
		{"the receiver's final record is what the answers allow", receiverFinal},
		{"the file is sound (integrity_check)", soundFile},
		// The fence in the user's transaction, and the business rows.
		{"every row's epoch granted to its writer", rowsGrantedToTheirWriters},
		{"business epochs never decrease in commit order", epochsInCommitOrder},
		{"the fence is the newest committed tenure and covers every row", fenceIsNewestTenure},
		{"no row commits after a newer tenure began", noStaleRow},
		{"transactions say what they did", transactionsTellTheTruth},
		{"every unknown outcome resolved, and resolved right", resolvedRight},
		// The session.
		{"no Check live at or after the lease's expiry", noLateCheck},
		{"Done at Deadline in an unstopped process", doneOnTime(doneTolerance)},
		{"no renewal commits after its session ended, in an unstopped process", renewalsEndWithTheirSession(doneTolerance)},
		{"Wait fails only with the caller's context", waitFailsOnlyWithTheCallersContext},
		{"Wait returns a live session", waitReturnsALiveSession},
		{"every grant reported to its caller or released by it", grantsReportedOrReleased},
		// The guard on the server's clock (the guarded variant).
		{"no row of epoch e commits after the grant of epoch e+1 returned", noRowAfterTheNextGrant},
		{"no guarded row of a transaction begun at or after its lease's expiry", noRowAfterExpiry},
		{"no row committed after its lease's expiry on the server's clock (commit timestamps)", noCommitAfterExpiry},
	}
}

// Options are what the checker takes beside the history.
type Options struct {
	// DoneTolerance is Checks' doneTolerance.
	DoneTolerance time.Duration
	// Timeout bounds porcupine's search: a share of the test's deadline.
	Timeout time.Duration
}

// Violation is what one check found.
type Violation struct {
	Check string
	Lines []string
}

// Verdict is what the checker found in a history: the violations of
// Checks, and porcupine's answer on the history against Model.
type Verdict struct {
	Checks       int // Checks', and porcupine's
	Violations   []Violation
	Linearizable porcupine.CheckResult
	Operations   int           // porcupine's operations
	Took         time.Duration // porcupine's search
	info         porcupine.LinearizationInfo
}

// Verify runs every check on h, and porcupine.
func Verify(h *History, opts Options) Verdict { return verify(h, Checks(opts.DoneTolerance), opts) }

// verify runs checks over h, and porcupine.
func verify(h *History, checks []Check, opts Options) Verdict {
	var v Verdict
	for _, check := range checks {
		v.Checks++
		if bad := check.Run(h); len(bad) > 0 {
			v.Violations = append(v.Violations, Violation{check.Name, bad})
		}
	}
	v.Checks++
	began := time.Now()
	v.Linearizable, v.info, v.Operations = h.Linearizable(opts.Timeout)
	v.Took = time.Since(began)
	return v
}

// Found is how many violations v holds: each check's lines, and one for a
// history that is not linearizable.
func (v Verdict) Found() int {
	n := 0
	for _, bad := range v.Violations {
		n += len(bad.Lines)
	}
	if v.Linearizable == porcupine.Illegal {
		n++
	}
	return n
}

// Report fails t with what v found, label first (the seed that replays
// the run), at most five lines a check; a history that is not
// linearizable is drawn for porcupine's viewer in a directory of its own
// that outlives the test, and the error names it.
func (v Verdict) Report(t testing.TB, label string) {
	t.Helper()
	for _, bad := range v.Violations {
		for _, line := range bad.Lines[:min(len(bad.Lines), 5)] {
			t.Errorf("%s: %s: %s", label, bad.Check, line)
		}
		if len(bad.Lines) > 5 {
			t.Errorf("%s: %s: and %d more", label, bad.Check, len(bad.Lines)-5)
		}
	}
	switch v.Linearizable {
	case porcupine.Illegal:
		dir, err := os.MkdirTemp("", "leases-history-")
		path := filepath.Join(dir, "history.html")
		if err == nil {
			err = porcupine.VisualizePath(Model.ToModel(), v.info, path)
		}
		t.Errorf("%s: the history is not linearizable against the model of the authority and the fence: see %s (%v)", label, path, err)
	case porcupine.Unknown:
		t.Errorf("%s: porcupine did not decide within its bound", label)
	}
}

// String is v in figures, for the test's log.
func (v Verdict) String() string {
	return fmt.Sprintf("checks: %d (porcupine: %s on %d operations in %v); violations found: %d",
		v.Checks, v.Linearizable, v.Operations, v.Took.Round(time.Millisecond), v.Found())
}

type key struct {
	resource string
	epoch    int64
}
