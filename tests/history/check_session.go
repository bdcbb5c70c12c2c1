package history

import (
	"fmt"
	"sort"
	"time"
)

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
		case op.Call.Op == "acquire" && op.Result() == ResultOK:
			k.epoch = op.Ret.Lease.Epoch
			expiry[k] = max(expiry[k], op.Ret.Lease.ExpiresAt)
		case op.Call.Op == "renew" && op.Result() == ResultOK:
			expiry[k] = max(expiry[k], op.Ret.Lease.ExpiresAt)
		case op.Call.Op == "renew" && (op.Result() == ResultUnknown || op.Result() == ResultKilled):
			expiry[k] = max(expiry[k], op.Call.Now+op.Call.TTL)
		}
	}
	var bad []string
	for _, op := range h.opsOf("check", ResultOK) {
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
	for _, w := range h.opsOf("wait", ResultOK) {
		began[fmt.Sprint(w.Worker, w.Call.Resource, w.Ret.Lease.Epoch)] = w.Ret.Tick
	}
	var got []Lateness
	for _, d := range h.Dones {
		late := time.Duration(d.Now-max(d.Deadline, began[fmt.Sprint(d.Worker, d.Resource, d.Epoch)])) * time.Millisecond
		from := d.At - late.Nanoseconds()
		got = append(got, Lateness{Late: late, Starved: h.StarvedBetween(d.Worker, from, d.At),
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

// StarvedBetween is how long, from from to to (nanoseconds), worker's
// reference timer could not fire: the process had no CPU. A recorded
// span that the window covers in part counts in proportion (a stall's
// span is exactly as long as it is late).
func (h *History) StarvedBetween(worker string, from, to int64) time.Duration {
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
			if late-h.StarvedBetween(op.Worker, end, commit) > tolerance && !h.stoppedBetween(op.Worker, end, commit) {
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
		if r := op.Result(); r != ResultOK && r != ResultKilled && (r != ResultCanceled && r != ResultUnknown || !op.Ret.CtxDone) {
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
// the lease. A release refused because the row changed at a later tick
// than the release's (backwards) found it superseded too, when the
// history holds a later grant: once this epoch was granted, only another
// holder's grant of a later epoch (after this one expired), and that
// epoch's renewals and release, write the row at a tick later than this
// holder's release. Session.Close counts that refusal as a lost lease,
// nothing to release; Wait meets it when it releases a grant that came
// back after the session's deadline and another holder was granted the
// resource meanwhile (on a busy machine the release's tick is read well
// before its transaction is decided). A holder killed in the Wait that
// made the grant told nobody, and is no caller any more.
func grantsReportedOrReleased(h *History) []string {
	grants, order, newest := h.lessorGrants()
	over := map[string]bool{} // by holder, resource and epoch: its own release found it over
	for _, r := range h.opsOf("release", ResultExpired, ResultNotHolder, ResultBackwards) {
		if r.Result() == ResultExpired || newest[r.Call.Resource] > r.Call.Epoch {
			over[fmt.Sprint(r.Call.Holder, r.Call.Resource, r.Call.Epoch)] = true
		}
	}
	reported, killed := map[string]bool{}, map[string]bool{}
	waits := map[string][]*Op{}
	for _, w := range h.opsOf("wait") {
		waits[w.Worker] = append(waits[w.Worker], w)
		switch r := w.Result(); {
		case r == ResultKilled:
			killed[fmt.Sprint(w.Worker, w.Call.Resource)] = true
		case w.Ret.Lease != nil && (r == ResultOK || r == ResultUnknown && !w.Ret.Released):
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
	for _, a := range h.opsOf("acquire", ResultOK) {
		granted[fmt.Sprint(a.Worker, a.Call.Resource, a.Ret.Lease.Epoch)] = a
	}
	var bad []string
	for _, w := range h.opsOf("wait", ResultOK) {
		if a := granted[fmt.Sprint(w.Worker, w.Call.Resource, w.Ret.Lease.Epoch)]; a != nil && w.Ret.Deadline <= a.Ret.Tick {
			bad = append(bad, fmt.Sprintf("%s: Wait returned epoch %d of %s, whose grant came back at tick %d, %d ms after the session's deadline",
				w.Worker, w.Ret.Lease.Epoch, w.Call.Resource, a.Ret.Tick, a.Ret.Tick-w.Ret.Deadline))
		}
	}
	return bad
}
