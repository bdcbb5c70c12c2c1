package history

import (
	"fmt"
	"slices"
	"sort"
)

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
	for _, op := range h.opsOf("tenure", ResultOK, ResultUnknown, ResultKilled) {
		possible[key{op.Call.Resource, op.Call.Epoch}] = true
		if op.Result() == ResultOK {
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
	for _, read := range h.opsOf("count", ResultOK) {
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
		case ResultOK:
			if !found || row.Seq != op.Ret.Seq || row.Epoch != op.Call.Epoch {
				bad = append(bad, fmt.Sprintf("transaction %s said it committed #%d, the database holds %+v (found %v)", op.Call.OpID, op.Ret.Seq, row, found))
			}
		case ResultUnknown, ResultKilled:
		default:
			if found {
				bad = append(bad, fmt.Sprintf("transaction %s said %s (%s), yet its row #%d committed", op.Call.OpID, op.Result(), op.Ret.Err, row.Seq))
			}
		}
	}
	return bad
}
