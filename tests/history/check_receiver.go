package history

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"leases"
)

// The fenced receiver's checks (the evidence's receiver, which the
// stress tests' workers write to): each answer's outcome, the fence, one
// value per epoch, and the record at the end. A call whose outcome is
// unknown may or may not have taken effect.

// receiverOps are the writes, fences and reads of the fenced receiver,
// by resource: those answered, and those whose worker was killed (or
// whose outcome is unknown).
func (h *History) receiverOps() (answered, unsure map[string][]*Op) {
	answered, unsure = map[string][]*Op{}, map[string][]*Op{}
	for _, o := range h.callsOf("write", "fence", "read") {
		switch {
		case maybe(o):
			unsure[o.Call.Resource] = append(unsure[o.Call.Resource], o)
		case o.Result() == ResultOK:
			answered[o.Call.Resource] = append(answered[o.Call.Resource], o)
		}
	}
	return answered, unsure
}

// shown is the receiver's record that o's answer showed.
func (o *Op) shown() leases.Record {
	if o.Ret == nil || o.Ret.Stored == nil {
		return leases.Record{}
	}
	return *o.Ret.Stored
}

// receiverAnswers: every write's or fence's outcome agrees with the
// record its answer shows, and no epoch had two values accepted.
func receiverAnswers(h *History) []string {
	var c checker
	answered, _ := h.receiverOps()
	for _, r := range slices.Sorted(maps.Keys(answered)) {
		acceptedAt := map[int64]*Op{}
		for _, o := range answered[r] {
			c.reply(o)
			if o.Call.Op != "write" || o.Ret.Outcome != leases.Accepted {
				continue
			}
			if earlier, ok := acceptedAt[o.Call.Epoch]; ok {
				c.fail("epoch %d of %s accepted two values: %v and %v", o.Call.Epoch, r, earlier, o)
			}
			acceptedAt[o.Call.Epoch] = o
		}
	}
	return c.problems
}

// reply checks that a write's or fence's outcome agrees with the record
// its answer shows.
func (c *checker) reply(o *Op) {
	if o.Call.Op == "read" {
		return
	}
	r, e, v := o.shown(), o.Call.Epoch, o.Call.Value
	write, fence := o.Call.Op == "write", o.Call.Op == "fence"
	var ok bool
	switch o.Ret.Outcome {
	case leases.Accepted:
		ok = write && r == leases.Record{Epoch: e, ValueEpoch: e, Value: v} || fence && r.Epoch == e && r.ValueEpoch < e
	case leases.Replay:
		ok = write && r == leases.Record{Epoch: e, ValueEpoch: e, Value: v} || fence && r.Epoch == e
	case leases.Conflict:
		ok = write && r.Epoch == e && r.ValueEpoch == e && r.Value != v
	case leases.Stale:
		ok = e < r.Epoch
	}
	if !ok {
		c.fail("%v: %s, with the record %+v", o, o.Ret.Outcome, r)
	}
}

// receiverFence: the receiver's epoch never went down. Every answer
// shows at least the highest epoch that an answer received before its
// call was made showed, and no write is accepted below it.
func receiverFence(h *History) []string {
	var c checker
	answered, _ := h.receiverOps()
	for _, r := range slices.Sorted(maps.Keys(answered)) {
		ops := answered[r]
		byCall := slices.SortedFunc(slices.Values(ops), func(a, b *Op) int { return cmp.Compare(a.Call.T, b.Call.T) })
		byRet := slices.SortedFunc(slices.Values(ops), func(a, b *Op) int { return cmp.Compare(a.Ret.T, b.Ret.T) })
		var highest *Op // among the answers received so far, the one with the highest epoch
		next := 0
		for _, o := range byCall {
			for ; next < len(byRet) && byRet[next].Ret.T < o.Call.T; next++ {
				if highest == nil || byRet[next].shown().Epoch > highest.shown().Epoch {
					highest = byRet[next]
				}
			}
			if highest == nil {
				continue
			}
			fence := highest.shown().Epoch
			switch {
			case o.Call.Op == "write" && o.Ret.Outcome == leases.Accepted && o.Call.Epoch < fence:
				c.fail("%v was accepted below epoch %d, which the receiver had committed before (%v)", o, fence, highest)
			case o.shown().Epoch < fence:
				c.fail("the fence of %s went down: %v saw epoch %d after %v had seen %d", r, o, o.shown().Epoch, highest, fence)
			}
		}
	}
	return c.problems
}

// receiverFinal: the receiver's record at the end (where the test read
// it) holds the highest epoch any answer showed and the value of the
// accepted write with the highest epoch, give or take the calls of
// unknown outcome.
func receiverFinal(h *History) []string {
	if h.Records == nil {
		return nil
	}
	var c checker
	answered, unsure := h.receiverOps()
	resources := map[string]bool{}
	for r := range answered {
		resources[r] = true
	}
	for r := range unsure {
		resources[r] = true
	}
	for r := range h.Records {
		resources[r] = true
	}
	for _, r := range slices.Sorted(maps.Keys(resources)) {
		var best *Op // the accepted write with the highest epoch
		var highest int64
		for _, o := range answered[r] {
			highest = max(highest, o.shown().Epoch)
			if o.Call.Op == "write" && o.Ret.Outcome == leases.Accepted && (best == nil || o.Call.Epoch > best.Call.Epoch) {
				best = o
			}
		}
		final, found := h.Records[r]
		fenceOK := final.Epoch == highest
		valueOK := best == nil && final.ValueEpoch == 0 || best != nil && final.ValueEpoch == best.Call.Epoch && final.Value == best.Call.Value
		for _, k := range unsure[r] {
			fenceOK = fenceOK || final.Epoch == k.Call.Epoch && k.Call.Epoch > highest
			valueOK = valueOK || k.Call.Op == "write" && final.ValueEpoch == k.Call.Epoch && final.Value == k.Call.Value &&
				(best == nil || k.Call.Epoch > best.Call.Epoch)
		}
		if !fenceOK || !valueOK {
			c.fail("the receiver's final record for %s is %+v (found %t); the answers say epoch %d and the value of %v, give or take %d calls of unknown outcome",
				r, final, found, highest, best, len(unsure[r]))
		}
	}
	return c.problems
}

// soundFile: SQLite's integrity_check found the file sound, where the
// test asked it.
func soundFile(h *History) []string {
	if h.Integrity == "" || h.Integrity == "ok" {
		return nil
	}
	return []string{fmt.Sprintf("integrity_check: %s", h.Integrity)}
}
