package history

import (
	"fmt"
	"time"
)

// leaseEnds are, by resource and epoch, the latest moment (wall clock,
// nanoseconds) at which each lease can have been live on the server's
// clock, from what the authority answered: the latest expiry that a
// grant or a renewal may have set, or, once it was released, the
// release's return if that came first. A renewal whose answer was lost
// (unknown, or its worker killed during it) read the server's clock
// before it could commit, so no later than its return or its worker's
// kill (the workers and the server read one machine's clock), and set
// the expiry at most that tick plus its TTL. A lease whose end is not
// known is left out (Unchecked counts its rows).
func leaseEnds(h *History) map[key]int64 {
	expiry, released, vague := map[key]int64{}, map[key]int64{}, map[key]bool{}
	for _, op := range h.Ops {
		if !op.Call.ServerTime {
			continue
		}
		k := key{op.Call.Resource, op.Call.Epoch}
		switch {
		case op.Call.Op == "acquire" && (op.Result() == ResultOK || op.Result() == ResultUnknown) && op.Ret.Lease != nil:
			k.epoch = op.Ret.Lease.Epoch
			expiry[k] = max(expiry[k], op.Ret.Lease.ExpiresAt)
		case op.Call.Op == "renew" && op.Result() == ResultOK:
			expiry[k] = max(expiry[k], op.Ret.Lease.ExpiresAt)
		case op.Call.Op == "renew" && op.Result() == ResultUnknown:
			expiry[k] = max(expiry[k], op.Ret.T/int64(time.Millisecond)+op.Call.TTL)
		case op.Call.Op == "renew" && op.Result() == ResultKilled:
			if op.Killed != nil {
				expiry[k] = max(expiry[k], op.Killed.T/int64(time.Millisecond)+op.Call.TTL)
			} else {
				vague[k] = true
			}
		case op.Call.Op == "release" && op.Result() == ResultOK:
			released[k] = op.Ret.T
		}
	}
	ends := map[key]int64{}
	for k, e := range expiry {
		if vague[k] {
			continue
		}
		ends[k] = e * int64(time.Millisecond)
		if r, ok := released[k]; ok {
			ends[k] = min(ends[k], r)
		}
	}
	return ends
}

// noCommitAfterExpiry: no business row commits after its lease's end on
// the server's clock. Each row's commit timestamp (the server's, taken
// as it writes the commit record) must come before the latest expiry the
// authority gave its epoch, and before the lease's release returned:
// the check at the commit (the store's deferred trigger) refuses a
// COMMIT that comes later, however long its holder or its backend was
// stopped. Nothing is allowed for the instant between that check and
// the commit record (the postgres module's TestCommitCheckWindow
// measures it).
func noCommitAfterExpiry(h *History) []string {
	ends, guarded := leaseEnds(h), h.guardedTxs()
	var bad []string
	for _, row := range h.Rows {
		end, known := ends[key{row.Resource, row.Epoch}]
		if row.CommittedAt == 0 || !guarded[row.OpID] || !known || row.CommittedAt < end {
			continue
		}
		bad = append(bad, fmt.Sprintf("LATE COMMIT: %s#%d at epoch %d by %s committed at %s, %v after its lease's end on the server's clock (%s)",
			row.Resource, row.Seq, row.Epoch, row.Writer, time.Unix(0, row.CommittedAt).UTC().Format("15:04:05.000000"),
			time.Duration(row.CommittedAt-end).Round(time.Microsecond), time.Unix(0, end).UTC().Format("15:04:05.000000")))
	}
	return bad
}

// guardedTxs are the OpIDs of the transactions admitted on the server's
// clock.
func (h *History) guardedTxs() map[string]bool {
	guarded := map[string]bool{}
	for _, op := range h.opsOf("tx") {
		if op.Call.ServerTime {
			guarded[op.Call.OpID] = true
		}
	}
	return guarded
}

// CommitMargins are the figures of noCommitAfterExpiry: how many rows it
// checked, how many it could not (no commit timestamp, or a lease whose
// end is not known), and the least time by which a checked row committed
// before its lease's end (negative: after it).
type CommitMargins struct {
	Checked, Unchecked int
	Least              time.Duration
}

// CommitMargins measures the guarded rows' commit times in h against
// their leases' ends.
func (h *History) CommitMargins() CommitMargins {
	var m CommitMargins
	ends, guarded := leaseEnds(h), h.guardedTxs()
	for _, row := range h.Rows {
		if !guarded[row.OpID] {
			continue
		}
		end, known := ends[key{row.Resource, row.Epoch}]
		if row.CommittedAt == 0 || !known {
			m.Unchecked++
			continue
		}
		margin := time.Duration(end - row.CommittedAt)
		if m.Checked == 0 || margin < m.Least {
			m.Least = margin
		}
		m.Checked++
	}
	return m
}

// nextGrants are the returns (wall clock) of the server-clock acquires
// that granted each epoch, by resource and epoch.
func nextGrants(h *History) map[key]int64 {
	granted := map[key]int64{}
	for _, op := range h.opsOf("acquire", ResultOK) {
		if op.Call.ServerTime {
			granted[key{op.Ret.Lease.Resource, op.Ret.Lease.Epoch}] = op.Ret.T
		}
	}
	return granted
}

// sentAt is when a transaction's COMMIT was sent at the earliest: its
// "commit" record, written before the COMMIT, or its call.
func (o *Op) sentAt() int64 {
	if o.Commit != nil {
		return o.Commit.T
	}
	return o.Call.T
}

// guardedRow is a transaction admitted on the server's clock, and the
// row it committed.
type guardedRow struct {
	*Op
	row Row
}

// guardedRows are the transactions admitted on the server's clock whose
// row committed, in the order of their calls.
func (h *History) guardedRows() []guardedRow {
	rows := h.rowsByOp()
	var got []guardedRow
	for _, op := range h.opsOf("tx") {
		if row, committed := rows[op.Call.OpID]; committed && op.Call.ServerTime {
			got = append(got, guardedRow{op, row})
		}
	}
	return got
}

// noRowAfterTheNextGrant: the gap that the guard closes, also for a
// holder paused past its expiry before the next holder has acted. A
// business row of epoch e whose COMMIT was sent after the grant of
// epoch e+1 returned committed after that grant. The fence alone allows
// it (until the next tenure's observe); the guard does not: a grant
// waits for every guarded transaction open on the lease row, and a
// guard after the grant answers NotLive.
func noRowAfterTheNextGrant(h *History) []string {
	granted := nextGrants(h)
	var bad []string
	for _, op := range h.guardedRows() {
		row := op.row
		if g, ok := granted[key{row.Resource, row.Epoch + 1}]; ok && op.sentAt() > g {
			bad = append(bad, fmt.Sprintf("LATE ROW: %s#%d at epoch %d by %s: its COMMIT was sent %v after the grant of epoch %d returned, and it committed",
				row.Resource, row.Seq, row.Epoch, row.Writer, time.Duration(op.sentAt()-g).Round(time.Microsecond), row.Epoch+1))
		}
	}
	for _, held := range h.heldLate() {
		bad = append(bad, fmt.Sprintf("LATE ROW: %s#%d at epoch %d by %s: its COMMIT was held, not committed when its backend continued %v after the grant of epoch %d returned, and it committed",
			held.row.Resource, held.row.Seq, held.row.Epoch, held.row.Writer, time.Duration(held.At-held.granted.Ret.T).Round(time.Microsecond), held.row.Epoch+1))
	}
	return bad
}

// HeldCommit is a guarded transaction's COMMIT that the controller held
// with its backend stopped: whether its row was Visible (committed) when
// the controller continued the backend, At (wall clock).
type HeldCommit struct {
	OpID    string
	At      int64
	Visible bool
}

// heldCommit is a held COMMIT whose row was not committed when its
// backend continued, with the grant of the next epoch (nil if none) and
// the row (Epoch 0 if it never committed).
type heldCommit struct {
	HeldCommit
	granted *Op
	row     Row
}

// held are the held COMMITs of h whose rows were not committed when the
// backend continued.
func (h *History) held() []heldCommit {
	grants := map[key]*Op{}
	for _, op := range h.opsOf("acquire", ResultOK) {
		if op.Call.ServerTime {
			grants[key{op.Ret.Lease.Resource, op.Ret.Lease.Epoch}] = op
		}
	}
	txs := map[string]*Op{}
	for _, op := range h.opsOf("tx") {
		txs[op.Call.OpID] = op
	}
	rows := h.rowsByOp()
	var got []heldCommit
	for _, hc := range h.Held {
		tx := txs[hc.OpID]
		if hc.Visible || tx == nil {
			continue
		}
		got = append(got, heldCommit{HeldCommit: hc, granted: grants[key{tx.Call.Resource, tx.Call.Epoch + 1}], row: rows[hc.OpID]})
	}
	return got
}

// heldLate are the held COMMITs whose row committed after the grant of
// the next epoch had returned: not committed when the backend continued,
// which was after that return.
func (h *History) heldLate() []heldCommit {
	var late []heldCommit
	for _, held := range h.held() {
		if held.row.Epoch != 0 && held.granted != nil && held.granted.Ret.T < held.At {
			late = append(late, held)
		}
	}
	return late
}

// expiries are the latest expiry tick that any answer gave each lease,
// by resource and epoch; a lease with a renewal of unknown outcome has
// none (its expiry is not known).
func expiries(h *History) map[key]int64 {
	expiry, vague := map[key]int64{}, map[key]bool{}
	for _, op := range h.Ops {
		if !op.Call.ServerTime {
			continue
		}
		switch {
		case op.Call.Op == "acquire" && op.Result() == ResultOK:
			k := key{op.Ret.Lease.Resource, op.Ret.Lease.Epoch}
			expiry[k] = max(expiry[k], op.Ret.Lease.ExpiresAt)
		case op.Call.Op == "renew" && op.Result() == ResultOK:
			k := key{op.Call.Resource, op.Call.Epoch}
			expiry[k] = max(expiry[k], op.Ret.Lease.ExpiresAt)
		case op.Call.Op == "renew" && (op.Result() == ResultUnknown || op.Result() == ResultKilled):
			vague[key{op.Call.Resource, op.Call.Epoch}] = true
		}
	}
	for k := range vague {
		delete(expiry, k)
	}
	return expiry
}

// noRowAfterExpiry: a guarded transaction that began at or after its
// lease's expiry tick must not commit a row: its guard read the server's
// clock later still (the workers and the server read one machine's
// clock), when the lease was no longer live.
func noRowAfterExpiry(h *History) []string {
	expiry := expiries(h)
	var bad []string
	for _, op := range h.guardedRows() {
		row := op.row
		if e, ok := expiry[key{row.Resource, row.Epoch}]; ok && op.Call.Tick >= e {
			bad = append(bad, fmt.Sprintf("EXPIRED ROW: %s#%d at epoch %d by %s: its transaction began at tick %d, %d ms after the lease's expiry tick %d, and it committed",
				row.Resource, row.Seq, row.Epoch, row.Writer, op.Call.Tick, op.Call.Tick-e, e))
		}
	}
	return bad
}

// HeldPastExpiry counts what the guarded variant's faults did to the
// transactions that the guard had admitted.
type HeldPastExpiry struct {
	// NotLive is how many tenures and transactions the guard refused.
	NotLive int
	// Situations are the admitted transactions of epoch e whose worker
	// was stopped (after the guard, or with its COMMIT held) until past
	// the lease's expiry, while another worker was acquiring the
	// resource: a holder paused past its expiry before the new holder
	// had acted. Committed of them committed a row (before the next
	// grant, or LateRows counts it).
	Situations, Committed int
	// SentAfterGrant are the transactions of epoch e whose COMMIT was
	// sent after the grant of e+1 returned; LateRows, those of them that
	// committed (each a violation of noRowAfterTheNextGrant).
	SentAfterGrant, LateRows int
	// HeldContended are the held COMMITs (Held) not yet committed when
	// their backend continued, for which the next epoch was granted
	// afterwards or had been: HeldWaited of them, by an acquire called
	// before the backend continued and returning after (the grant waited
	// for the held transaction); HeldLate, committed after the grant had
	// returned (each a violation).
	HeldContended, HeldWaited, HeldLate int
}

// HeldPastExpiry counts the guarded variant's situations in h.
func (h *History) HeldPastExpiry() HeldPastExpiry {
	var f HeldPastExpiry
	granted, expiry, rows := nextGrants(h), expiries(h), h.rowsByOp()
	acquires := h.opsOf("acquire")
	for _, op := range h.Ops {
		if op.Call.ServerTime && op.Result() == ResultNotLive {
			f.NotLive++
		}
	}
	for _, held := range h.held() {
		g := held.granted
		switch {
		case g == nil:
		case g.Ret.T < held.At:
			f.HeldContended++
			if held.row.Epoch != 0 {
				f.HeldLate++
			}
		case g.Call.T < held.At:
			f.HeldContended++
			f.HeldWaited++
		}
	}
	for _, op := range h.opsOf("tx") {
		if !op.Call.ServerTime {
			continue
		}
		_, committed := rows[op.Call.OpID]
		k := key{op.Call.Resource, op.Call.Epoch}
		if g, ok := granted[key{k.resource, k.epoch + 1}]; ok && op.Commit != nil && op.Commit.T > g {
			f.SentAfterGrant++
			if committed {
				f.LateRows++
			}
		}
		e, known := expiry[k]
		if op.Commit == nil || op.Ret == nil || !known || op.Ret.Tick < e || !h.stoppedBetween(op.Worker, op.Call.T, op.Ret.T) {
			continue
		}
		contended := false
		for _, a := range acquires {
			contended = contended || (a.Worker != op.Worker && a.Call.Resource == k.resource &&
				a.Call.T < op.Ret.T && (a.Ret == nil || a.Ret.T > op.Call.T))
		}
		if !contended {
			continue
		}
		f.Situations++
		if committed {
			f.Committed++
		}
	}
	return f
}
