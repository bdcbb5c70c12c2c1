package stress

// The checker's half for the fenced receiver: each reply's outcome, the
// fence, one value per epoch, and the record at the end.

import (
	"cmp"
	"slices"

	"leases"
)

// receiver checks one resource's writes, observes and reads, and the
// receiver's final record.
func (c *checker) receiver(resource string, ops []*operation, final receiverRecord) {
	var answered, killed []*operation
	for _, o := range ops {
		switch {
		case o.kind != writeOp && o.kind != observeOp && o.kind != readOp:
		case o.killed:
			killed = append(killed, o)
		default:
			answered = append(answered, o)
			c.reply(o)
		}
	}
	c.fence(resource, answered)
	best, highest := c.oneValuePerEpoch(resource, answered)
	fenceOK := final.Epoch == highest
	valueOK := best == nil && final.ValueEpoch == 0 || best != nil && final.ValueEpoch == best.epoch && final.Value == best.value
	for _, k := range killed {
		fenceOK = fenceOK || final.Epoch == k.epoch && k.epoch > highest
		valueOK = valueOK || k.kind == writeOp && final.ValueEpoch == k.epoch && final.Value == k.value && (best == nil || k.epoch > best.epoch)
	}
	if !fenceOK || !valueOK {
		c.fail("the receiver's final record for %s is %+v (found %t); the replies say epoch %d and the value of %v, give or take %d killed operations",
			resource, final.Record, final.found, highest, best, len(killed))
	}
}

// oneValuePerEpoch checks that no epoch had two values accepted, and
// returns the accepted write with the highest epoch (nil if none) and the
// highest epoch any reply showed.
func (c *checker) oneValuePerEpoch(resource string, answered []*operation) (best *operation, highest int64) {
	acceptedAt := map[int64]*operation{}
	for _, o := range answered {
		highest = max(highest, o.seen().Epoch)
		if o.kind != writeOp || o.write.Outcome != leases.Accepted {
			continue
		}
		if earlier, ok := acceptedAt[o.epoch]; ok {
			c.fail("epoch %d of %s accepted two values: %v and %v", o.epoch, resource, earlier, o)
		}
		acceptedAt[o.epoch] = o
		if best == nil || o.epoch > best.epoch {
			best = o
		}
	}
	return best, highest
}

// reply checks that a write's or observe's outcome agrees with the record
// its reply shows.
func (c *checker) reply(o *operation) {
	if o.write == nil {
		return
	}
	r, e := o.write.Record, o.epoch
	var ok bool
	switch o.write.Outcome {
	case leases.Accepted:
		ok = o.kind == writeOp && r == leases.Record{Epoch: e, ValueEpoch: e, Value: o.value} ||
			o.kind == observeOp && r.Epoch == e && r.ValueEpoch < e
	case leases.Replay:
		ok = o.kind == writeOp && r == leases.Record{Epoch: e, ValueEpoch: e, Value: o.value} ||
			o.kind == observeOp && r.Epoch == e
	case leases.Conflict:
		ok = o.kind == writeOp && r.Epoch == e && r.ValueEpoch == e && r.Value != o.value
	case leases.Stale:
		ok = e < r.Epoch
	}
	if !ok {
		c.fail("%v: %s, with the record %+v", o, o.write.Outcome, r)
	}
}

// fence checks that the receiver's epoch never went down: every reply
// shows at least the highest epoch that a reply received before its
// request was sent showed, and no write is accepted below it.
func (c *checker) fence(resource string, ops []*operation) {
	bySent := slices.SortedFunc(slices.Values(ops), func(a, b *operation) int { return cmp.Compare(a.sent, b.sent) })
	byDone := slices.SortedFunc(slices.Values(ops), func(a, b *operation) int { return cmp.Compare(a.done, b.done) })
	var highest *operation // among the replies received so far, the one with the highest epoch
	next := 0
	for _, o := range bySent {
		for ; next < len(byDone) && byDone[next].done < o.sent; next++ {
			if highest == nil || byDone[next].seen().Epoch > highest.seen().Epoch {
				highest = byDone[next]
			}
		}
		if highest == nil {
			continue
		}
		fence := highest.seen().Epoch
		switch {
		case o.kind == writeOp && o.write.Outcome == leases.Accepted && o.epoch < fence:
			c.fail("%v was accepted below epoch %d, which the receiver had committed before (%v)", o, fence, highest)
		case o.seen().Epoch < fence:
			c.fail("the fence of %s went down: %v saw epoch %d after %v had seen %d", resource, o, o.seen().Epoch, highest, fence)
		}
	}
}
