package chaos

import (
	"fmt"
	"slices"
	"sort"
	"time"
)

// Check is one of the safety properties of the service path, checked on
// a history: it returns a line for each violation it finds.
type Check struct {
	Name string
	Run  func(h *History) []string
}

// Checks are the properties every run must keep. DoneTolerance is how
// late a session's Done may close after its Deadline in a process that
// was not stopped meanwhile, beyond the time in which the process could
// run no timer at all (its reference timer's starvation).
func Checks(doneTolerance time.Duration) []Check {
	return []Check{
		{"every epoch granted once", epochsGrantedOnce},
		{"every row's epoch granted to its writer", rowsGrantedToTheirWriters},
		{"business epochs never decrease in commit order", epochsInCommitOrder},
		{"the fence is the newest committed tenure and covers every row", fenceIsNewestTenure},
		{"no row commits after a newer tenure began", noStaleRow},
		{"transactions say what they did", transactionsTellTheTruth},
		{"every unknown outcome resolved, and resolved right", resolvedRight},
		{"the lessor's epochs are those granted", lessorEpochs},
		{"no Check live at or after the lease's expiry", noLateCheck},
		{"Done at Deadline in an unstopped process", doneOnTime(doneTolerance)},
		{"no renewal commits after its session ended, in an unstopped process", renewalsEndWithTheirSession(doneTolerance)},
		{"Wait fails only with the caller's context", waitFailsOnlyWithTheCallersContext},
		{"Wait returns a live session", waitReturnsALiveSession},
		{"every grant reported to its caller or released by it", grantsReportedOrReleased},
		{"no call refused as invalid input", noInvalidInput},
	}
}

type key struct {
	resource string
	epoch    int64
}

// grants are the epochs granted: by resource and epoch, the holders of
// the acquires that returned them.
func grants(h *History) map[key][]string {
	g := map[key][]string{}
	for _, op := range h.opsOf("acquire", resultOK) {
		l := op.Ret.Lease
		g[key{l.Resource, l.Epoch}] = append(g[key{l.Resource, l.Epoch}], l.Holder)
	}
	return g
}

func epochsGrantedOnce(h *History) []string {
	var bad []string
	for k, holders := range grants(h) {
		if len(holders) > 1 {
			bad = append(bad, fmt.Sprintf("epoch %d of %s granted %d times: to %v", k.epoch, k.resource, len(holders), holders))
		}
	}
	return bad
}

func rowsGrantedToTheirWriters(h *History) []string {
	g := grants(h)
	var bad []string
	for _, r := range h.Rows {
		if holders := g[key{r.Resource, r.Epoch}]; !slices.Contains(holders, r.Writer) {
			bad = append(bad, fmt.Sprintf("row %s#%d at epoch %d written by %s, but that epoch was granted to %v", r.Resource, r.Seq, r.Epoch, r.Writer, holders))
		}
	}
	return bad
}

func rowsByResource(h *History) map[string][]Row {
	by := map[string][]Row{}
	for _, r := range h.Rows {
		by[r.Resource] = append(by[r.Resource], r)
	}
	for _, rows := range by {
		sort.Slice(rows, func(i, j int) bool { return rows[i].Seq < rows[j].Seq })
	}
	return by
}

func epochsInCommitOrder(h *History) []string {
	var bad []string
	for resource, rows := range rowsByResource(h) {
		for i, r := range rows {
			if r.Seq != int64(i+1) {
				bad = append(bad, fmt.Sprintf("%s: row %d has sequence number %d", resource, i+1, r.Seq))
				break
			}
			if i > 0 && r.Epoch < rows[i-1].Epoch {
				bad = append(bad, fmt.Sprintf("%s: row #%d at epoch %d (by %s) committed after row #%d at epoch %d (by %s)",
					resource, r.Seq, r.Epoch, r.Writer, rows[i-1].Seq, rows[i-1].Epoch, rows[i-1].Writer))
			}
		}
		if n := h.Counters[resource]; n != int64(len(rows)) {
			bad = append(bad, fmt.Sprintf("%s: the counter is at %d, with %d rows", resource, n, len(rows)))
		}
	}
	return bad
}

func fenceIsNewestTenure(h *History) []string {
	newest, possible := map[string]int64{}, map[key]bool{}
	for _, op := range h.opsOf("tenure", resultOK, resultUnknown, resultKilled) {
		possible[key{op.Call.Resource, op.Call.Epoch}] = true
		if op.Result() == resultOK {
			newest[op.Call.Resource] = max(newest[op.Call.Resource], op.Call.Epoch)
		}
	}
	var bad []string
	resources := map[string]bool{}
	for r := range h.Fences {
		resources[r] = true
	}
	for r := range newest {
		resources[r] = true
	}
	for resource := range resources {
		f := h.Fences[resource]
		switch {
		case f < newest[resource]:
			bad = append(bad, fmt.Sprintf("%s: the fence is at %d, below the tenure of epoch %d that began", resource, f, newest[resource]))
		case f > newest[resource] && !possible[key{resource, f}]:
			bad = append(bad, fmt.Sprintf("%s: the fence is at %d, which no tenure may have begun (the newest that did: %d)", resource, f, newest[resource]))
		}
	}
	for resource, rows := range rowsByResource(h) {
		for _, r := range rows {
			if r.Epoch > h.Fences[resource] {
				bad = append(bad, fmt.Sprintf("%s: row #%d at epoch %d above the fence at %d", resource, r.Seq, r.Epoch, h.Fences[resource]))
			}
		}
	}
	return bad
}

// noStaleRow: once a tenure of epoch e has begun, no transaction of an
// older epoch commits. Right after its Tenure returned, each holder read
// how many rows the resource had (the counter); a row of an older epoch
// numbered above that count committed after the newer tenure began.
func noStaleRow(h *History) []string {
	var bad []string
	for _, read := range h.opsOf("read", resultOK) {
		for _, r := range h.Rows {
			if r.Resource == read.Call.Resource && r.Epoch < read.Call.Epoch && r.Seq > read.Ret.Seq {
				bad = append(bad, fmt.Sprintf("STALE ROW: %s#%d at epoch %d by %s committed after the tenure of epoch %d (%s) began, which found %d rows",
					r.Resource, r.Seq, r.Epoch, r.Writer, read.Call.Epoch, read.Worker, read.Ret.Seq))
			}
		}
	}
	return bad
}

func transactionsTellTheTruth(h *History) []string {
	rows := h.rowsByOp()
	var bad []string
	for _, op := range h.opsOf("tx") {
		row, found := rows[op.Call.OpID]
		switch op.Result() {
		case resultOK:
			if !found || row.Seq != op.Ret.Seq || row.Epoch != op.Call.Epoch {
				bad = append(bad, fmt.Sprintf("transaction %s said it committed #%d, the database holds %+v (found %v)", op.Call.OpID, op.Ret.Seq, row, found))
			}
		case resultUnknown, resultKilled:
		default:
			if found {
				bad = append(bad, fmt.Sprintf("transaction %s said %s (%s), yet its row #%d committed", op.Call.OpID, op.Result(), op.Ret.Err, row.Seq))
			}
		}
	}
	return bad
}

func lessorEpochs(h *History) []string {
	newest, possible := map[string]int64{}, map[string]int64{}
	for _, op := range h.opsOf("acquire", resultOK, resultUnknown, resultKilled) {
		r := op.Call.Resource
		if op.Result() == resultOK {
			newest[r] = max(newest[r], op.Ret.Lease.Epoch)
		}
		possible[r]++ // each may have taken the next epoch
	}
	var bad []string
	for r, e := range h.Epochs {
		if e < newest[r] || e > possible[r] {
			bad = append(bad, fmt.Sprintf("%s: the lessor is at epoch %d; granted: up to %d, at most %d acquires may have taken effect", r, e, newest[r], possible[r]))
		}
	}
	return bad
}

// noLateCheck: a Check that answered nil must have been made before the
// lease could have expired: before the latest expiry tick any grant or
// renewal of that lease may have set (an unknown renewal counts with the
// expiry it asked for). The tick is the worker's clock read before the
// call, so a Check that itself read a later tick is still caught.
func noLateCheck(h *History) []string {
	expiry := map[key]int64{}
	for _, op := range h.Ops {
		k := key{op.Call.Resource, op.Call.Epoch}
		switch {
		case op.Call.Op == "acquire" && op.Result() == resultOK:
			k.epoch = op.Ret.Lease.Epoch
			expiry[k] = max(expiry[k], op.Ret.Lease.ExpiresAt)
		case op.Call.Op == "renew" && op.Result() == resultOK:
			expiry[k] = max(expiry[k], op.Ret.Lease.ExpiresAt)
		case op.Call.Op == "renew" && (op.Result() == resultUnknown || op.Result() == resultKilled):
			expiry[k] = max(expiry[k], op.Call.Now+op.Call.TTL)
		}
	}
	var bad []string
	for _, op := range h.opsOf("check", resultOK) {
		if e := expiry[key{op.Call.Resource, op.Call.Epoch}]; op.Call.Now >= e {
			bad = append(bad, fmt.Sprintf("%s: Check of epoch %d of %s was nil at tick %d, %d ms after the lease's expiry tick %d",
				op.Worker, op.Call.Epoch, op.Call.Resource, op.Call.Now, op.Call.Now-e, e))
		}
	}
	return bad
}

// Lateness is how late each session's Done closed after its Deadline,
// whether its process was stopped between the two, and for how long in
// that span the process could run no timer at all (Starved).
type Lateness struct {
	Late, Starved time.Duration
	Stopped       bool
	Done          Done
}

// Latenesses are the Done records' lateness: after the session's
// Deadline, or after Wait returned it if that was later (a session that
// ended before Wait returned it is another check's).
func (h *History) Latenesses() []Lateness {
	began := map[string]int64{} // by worker, resource and epoch: when Wait returned
	for _, w := range h.opsOf("wait", resultOK) {
		began[fmt.Sprint(w.Worker, w.Call.Resource, w.Ret.Lease.Epoch)] = w.Ret.Tick
	}
	var got []Lateness
	for _, d := range h.Dones {
		late := time.Duration(d.Now-max(d.Deadline, began[fmt.Sprint(d.Worker, d.Resource, d.Epoch)])) * time.Millisecond
		from := d.At - late.Nanoseconds()
		got = append(got, Lateness{Late: late, Starved: h.starvedBetween(d.Worker, from, d.At),
			Stopped: h.stoppedBetween(d.Worker, from, d.At), Done: d})
	}
	return got
}

func doneOnTime(tolerance time.Duration) func(h *History) []string {
	return func(h *History) []string {
		var bad []string
		for _, l := range h.Latenesses() {
			if l.Late-l.Starved > tolerance && !l.Stopped {
				bad = append(bad, fmt.Sprintf("%s: Done of epoch %d of %s closed %v after its Deadline (tolerance %v), and the process was not stopped (it ran no timer for %v of it): %s",
					l.Done.Worker, l.Done.Epoch, l.Done.Resource, l.Late, tolerance, l.Starved.Round(time.Millisecond), l.Done.Err))
			}
		}
		return bad
	}
}

// stoppedBetween reports whether worker was stopped at some moment from
// from to to (nanoseconds).
func (h *History) stoppedBetween(worker string, from, to int64) bool {
	for _, iv := range h.Stopped[worker] {
		if iv.From <= to && iv.To >= from {
			return true
		}
	}
	return false
}

// starvedBetween is how long, from from to to (nanoseconds), worker's
// reference timer could not fire: the process had no CPU. A recorded
// span that the window covers in part counts in proportion (a stall's
// span is exactly as long as it is late).
func (h *History) starvedBetween(worker string, from, to int64) time.Duration {
	spans := h.Starved[worker]
	// The spans are in time order, and apart (one goroutine makes them).
	first := sort.Search(len(spans), func(i int) bool { return spans[i].To > from })
	var total float64
	for _, s := range spans[first:] {
		if s.From >= to {
			break
		}
		overlap := min(s.To, to) - max(s.From, from)
		total += float64(s.Late) * min(1, float64(overlap)/float64(max(1, s.To-s.From)))
	}
	return time.Duration(total)
}

// renewalsEndWithTheirSession: every renewal runs under the session's
// context, which ends with the session, so that no renewal begins to
// commit after the session's end (a renewal waiting for the lessor's
// write lock is cut off), give or take the tolerance, unless the process
// was stopped or could run no timer meanwhile. A renewal whose commit
// began in time may return later: a commit is not interrupted.
func renewalsEndWithTheirSession(tolerance time.Duration) func(h *History) []string {
	return func(h *History) []string {
		ended := map[string]int64{}
		for _, d := range h.Dones {
			ended[fmt.Sprint(d.Worker, d.Resource, d.Epoch)] = d.At
		}
		var bad []string
		for _, op := range h.opsOf("renew") {
			end, ok := ended[fmt.Sprint(op.Worker, op.Call.Resource, op.Call.Epoch)]
			if !ok || op.Ret == nil {
				continue
			}
			// The renewal's commit: the last that began within the call
			// (the worker's store has one connection, and its session's
			// other calls wait for the renewal).
			var commit int64
			for _, c := range h.LessorCommits[op.Worker] {
				if c >= op.Call.T && c <= op.Ret.T {
					commit = c
				}
			}
			if commit == 0 {
				continue // cut off, or failed, before it committed
			}
			late := time.Duration(commit - end)
			if late-h.starvedBetween(op.Worker, end, commit) > tolerance && !h.stoppedBetween(op.Worker, end, commit) {
				bad = append(bad, fmt.Sprintf("%s: a renewal of epoch %d of %s began to commit %v after the session ended (%s)",
					op.Worker, op.Call.Epoch, op.Call.Resource, late.Round(time.Millisecond), op.Result()))
			}
		}
		return bad
	}
}

func waitFailsOnlyWithTheCallersContext(h *History) []string {
	var bad []string
	for _, op := range h.opsOf("wait") {
		if r := op.Result(); r != resultOK && r != resultKilled && (r != resultCanceled && r != resultUnknown || !op.Ret.CtxDone) {
			bad = append(bad, fmt.Sprintf("%s: Wait for %s failed: %s", op.Worker, op.Call.Resource, op.Ret.Err))
		}
	}
	return bad
}

// lessorGrant is a grant the lessor's history holds.
type lessorGrant struct {
	holder   string
	released bool // the history holds its release
}

// lessorGrants are the grants the lessor's history holds, in the order
// they were made, and the newest epoch of each resource.
func (h *History) lessorGrants() (grants map[key]*lessorGrant, order []key, newest map[string]int64) {
	grants, newest = map[key]*lessorGrant{}, map[string]int64{}
	for _, w := range h.LessorRows {
		k := key{w.Resource, w.Epoch}
		switch g := grants[k]; {
		case g == nil && w.Held:
			grants[k] = &lessorGrant{holder: w.Holder}
			order = append(order, k)
			newest[w.Resource] = max(newest[w.Resource], w.Epoch)
		case g != nil && !w.Held:
			g.released = true
		}
	}
	return grants, order, newest
}

// grantsReportedOrReleased: every grant the lessor's history holds
// (issue 20: a grant that took effect while Wait said only that its
// context had ended) was released by its holder, or reported to it by
// Wait: a session (Wait returned it), or a lease in doubt that Wait's
// error says may still be held. Released means: the history holds the
// release, or the holder's release of that epoch found it over (expired,
// or superseded by a later grant the history holds), which is what a
// session's release of a lease in doubt answers when the doubt outlasted
// the lease. A holder killed in the Wait that made the grant told
// nobody, and is no caller any more.
func grantsReportedOrReleased(h *History) []string {
	grants, order, newest := h.lessorGrants()
	over := map[string]bool{} // by holder, resource and epoch: its own release found it over
	for _, r := range h.opsOf("release", resultExpired, resultNotHolder) {
		if r.Result() == resultExpired || newest[r.Call.Resource] > r.Call.Epoch {
			over[fmt.Sprint(r.Call.Holder, r.Call.Resource, r.Call.Epoch)] = true
		}
	}
	reported, killed := map[string]bool{}, map[string]bool{}
	waits := map[string][]*Op{}
	for _, w := range h.opsOf("wait") {
		waits[w.Worker] = append(waits[w.Worker], w)
		switch r := w.Result(); {
		case r == resultKilled:
			killed[fmt.Sprint(w.Worker, w.Call.Resource)] = true
		case w.Ret.Lease != nil && (r == resultOK || r == resultUnknown && !w.Ret.Released):
			reported[fmt.Sprint(w.Worker, w.Call.Resource, w.Ret.Lease.Epoch)] = true
		}
	}
	// The Wait each acquire that named an epoch was made in: the worker's
	// latest Wait called before it.
	within := map[string]*Op{}
	for _, a := range h.opsOf("acquire") {
		if a.Ret == nil || a.Ret.Lease == nil {
			continue
		}
		for _, w := range waits[a.Worker] {
			if w.Call.T <= a.Call.T {
				within[fmt.Sprint(a.Worker, a.Call.Resource, a.Ret.Lease.Epoch)] = w
			}
		}
	}
	var bad []string
	for _, k := range order {
		g := grants[k]
		id := fmt.Sprint(g.holder, k.resource, k.epoch)
		if g.released || over[id] || reported[id] {
			continue
		}
		w := within[id]
		if w == nil && killed[fmt.Sprint(g.holder, k.resource)] || w != nil && w.Ret == nil {
			continue // its holder was killed during the Wait
		}
		said := "no acquire of its named that epoch"
		if w != nil {
			said = fmt.Sprintf("its Wait returned %s", w.Result())
			if l := w.Ret.Lease; l != nil {
				said += fmt.Sprintf(" naming epoch %d", l.Epoch)
			}
			if w.Ret.Err != "" {
				said += ": " + w.Ret.Err
			}
		}
		bad = append(bad, fmt.Sprintf("%s: epoch %d of %s was granted to it, never released, and never reported: %s",
			g.holder, k.epoch, k.resource, said))
	}
	return bad
}

// waitReturnsALiveSession: Wait must not return a session whose grant
// came back after its deadline. The acquire that granted it returned at
// a tick no later than Wait's last look at the session.
func waitReturnsALiveSession(h *History) []string {
	granted := map[string]*Op{}
	for _, a := range h.opsOf("acquire", resultOK) {
		granted[fmt.Sprint(a.Worker, a.Call.Resource, a.Ret.Lease.Epoch)] = a
	}
	var bad []string
	for _, w := range h.opsOf("wait", resultOK) {
		if a := granted[fmt.Sprint(w.Worker, w.Call.Resource, w.Ret.Lease.Epoch)]; a != nil && w.Ret.Deadline <= a.Ret.Tick {
			bad = append(bad, fmt.Sprintf("%s: Wait returned epoch %d of %s, whose grant came back at tick %d, %d ms after the session's deadline",
				w.Worker, w.Ret.Lease.Epoch, w.Call.Resource, a.Ret.Tick, a.Ret.Tick-w.Ret.Deadline))
		}
	}
	return bad
}

func noInvalidInput(h *History) []string {
	var bad []string
	for _, op := range h.Ops {
		if op.Result() == resultInvalid {
			bad = append(bad, fmt.Sprintf("%s: %s refused as invalid input: %s", op.Worker, op.Call.Op, op.Ret.Err))
		}
	}
	return bad
}

// ReleaseToGrant is, for each grant that followed a release while its
// worker was waiting, the time from the release's return to the grant's;
// undisturbed are those during which no process was stopped (a worker
// stopped holding the lessor's write lock holds every grant up).
func (h *History) ReleaseToGrant() (all, undisturbed []time.Duration) {
	released := map[key]*Op{}
	for _, op := range h.opsOf("release", resultOK) {
		released[key{op.Call.Resource, op.Call.Epoch}] = op
	}
	// The Wait each grant ended, by worker: the latest Wait call before it.
	waits := map[string][]*Op{}
	for _, op := range h.opsOf("wait") {
		waits[op.Worker] = append(waits[op.Worker], op)
	}
	for _, op := range h.opsOf("acquire", resultOK) {
		l := op.Ret.Lease
		rel := released[key{l.Resource, l.Epoch - 1}]
		if rel == nil {
			continue
		}
		var wait *Op
		for _, w := range waits[op.Worker] {
			if w.Call.T <= op.Call.T {
				wait = w
			}
		}
		if wait == nil || wait.Call.T >= rel.Ret.T {
			continue // not waiting when the lease was released
		}
		d := time.Duration(op.Ret.T - rel.Ret.T)
		all = append(all, d)
		disturbed := false
		for worker := range h.Stopped {
			disturbed = disturbed || h.stoppedBetween(worker, rel.Ret.T, op.Ret.T)
		}
		if !disturbed {
			undisturbed = append(undisturbed, d)
		}
	}
	return all, undisturbed
}

// AfterFault is how long after a fault the service path went on: the
// time from the moment the fault was in effect to the return of the
// first call invoked after it that was accepted. Nil where none came
// before the run ended.
type AfterFault struct {
	// Grant: an acquire that returned ok.
	Grant *time.Duration
	// Write: a renewal that returned ok or a fenced transaction that
	// committed (its row is there); Renewal, a renewal alone, the
	// lessor's own write (a transaction goes to the worker's database).
	Write, Renewal *time.Duration
}

// AfterFault is what came after a fault in effect from at (nanoseconds
// since the Unix epoch). Calls already under way then do not count: they
// may have been decided before it.
func (h *History) AfterFault(at int64) AfterFault {
	rows := h.rowsByOp()
	first := func(ops ...[]*Op) *time.Duration {
		var next int64
		for _, op := range slices.Concat(ops...) {
			if _, committed := rows[op.Call.OpID]; op.Call.Op == "tx" && !committed {
				continue
			}
			if op.Call.T >= at && (next == 0 || op.Ret.T < next) {
				next = op.Ret.T
			}
		}
		if next == 0 {
			return nil
		}
		d := time.Duration(next - at)
		return &d
	}
	renewals := h.opsOf("renew", resultOK)
	return AfterFault{
		Grant:   first(h.opsOf("acquire", resultOK)),
		Write:   first(renewals, h.opsOf("tx", resultOK)),
		Renewal: first(renewals),
	}
}
