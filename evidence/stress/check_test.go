package stress

// The checker both tests share: what every reply and the file at the end
// must agree on, whatever was paused or killed. Operations run
// concurrently, so the only order it relies on is the one the test saw: an
// operation whose reply came before another was sent committed before that
// one began. An operation whose worker was killed in flight may or may not
// have committed; the checker allows for both (the load kills nobody, so
// there it allows nothing).

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"leases"
)

// checker collects every violation it finds.
type checker struct{ problems []string }

func (c *checker) fail(format string, args ...any) {
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
}

// checkRecord returns every violation that the operations and the file at
// the end show, one line each.
func checkRecord(ops []*operation, final fileState, resources []string) []string {
	var c checker
	for _, resource := range resources {
		var mine []*operation
		for _, o := range ops {
			if o.resource == resource {
				mine = append(mine, o)
			}
		}
		row, found := final.rows[resource]
		c.authority(resource, mine, row, found)
		c.receiver(resource, mine, final.records[resource])
	}
	if final.integrity != "ok" {
		c.fail("integrity_check: %s", final.integrity)
	}
	return c.problems
}

// tenure is one epoch's lease: granted, maybe renewed, maybe released.
type tenure struct {
	epoch      int64
	holder     string
	start, end int64 // live at ticks start .. end-1
	// sure is the end it certainly had: a killed release may have ended
	// it sooner.
	sure  int64
	grant *operation // nil when inferred from a killed acquire
	// final is the row it leaves behind; maybe the row it leaves if its
	// killed last renewal or release committed.
	final authorityRow
	maybe *authorityRow
}

// authority checks one resource's grants, renewals and releases, and the
// authority's final row.
func (c *checker) authority(resource string, ops []*operation, row authorityRow, found bool) {
	byEpoch, killedAcquires := c.grants(resource, ops)
	// Renewals and releases of one tenure all come from its holder, one at
	// a time, so the order they were sent in is the order they ran in.
	for _, o := range ops {
		if (o.kind == renewOp || o.kind == releaseOp) && !o.refused && o.rejected == "" {
			c.change(resource, o, byEpoch[o.epoch])
		}
	}
	epochs := slices.Sorted(maps.Keys(byEpoch))
	c.grantOrder(resource, byEpoch, epochs)
	top := c.topEpoch(resource, epochs, row, found)
	c.overlaps(resource, c.gaps(resource, byEpoch, killedAcquires, top))
	if found {
		c.finalRow(resource, row, byEpoch[row.epoch], killedAcquires)
	}
}

// grants returns the tenures that the answered grants of resource began,
// by epoch, and the acquires killed in flight.
func (c *checker) grants(resource string, ops []*operation) (map[int64]*tenure, []*operation) {
	byEpoch := map[int64]*tenure{}
	var killed []*operation
	for _, o := range ops {
		switch {
		case o.kind == acquireOp && o.killed:
			killed = append(killed, o)
		case o.kind == acquireOp && o.committed():
			l := *o.lease
			if l.Resource != resource || l.Holder != o.worker || l.GrantedAt != o.tick || l.ExpiresAt != o.tick+o.ttl || l.Epoch < 1 {
				c.fail("%v was granted %+v", o, l)
			}
			if earlier, dup := byEpoch[l.Epoch]; dup {
				c.fail("epoch %d of %s granted twice: by %v and by %v", l.Epoch, resource, earlier.grant, o)
				continue
			}
			final := authorityRow{epoch: l.Epoch, holder: l.Holder, grantedAt: l.GrantedAt, expiresAt: l.ExpiresAt, lastTick: o.tick}
			byEpoch[l.Epoch] = &tenure{epoch: l.Epoch, holder: l.Holder, start: l.GrantedAt, end: l.ExpiresAt, sure: l.ExpiresAt, grant: o, final: final}
		}
	}
	return byEpoch, killed
}

// change applies a renewal or release o, answered or killed, to its
// tenure t, checking that an answered one found the lease live.
func (c *checker) change(resource string, o *operation, t *tenure) {
	if t == nil {
		if !o.killed {
			c.fail("%v succeeded, but nobody the test heard from was granted that epoch", o)
		}
		return
	}
	live := o.tick >= t.start && o.tick < t.end
	// A renewal never moves the expiry earlier.
	next := authorityRow{epoch: t.epoch, holder: t.holder, grantedAt: t.start, expiresAt: max(t.end, o.tick+o.ttl), lastTick: o.tick}
	if o.kind == releaseOp {
		next.holder, next.expiresAt = "", o.tick
	}
	if o.killed {
		if live { // else it was refused, had it run
			t.maybe = &next
			t.sure = min(t.sure, next.expiresAt)
		}
		return
	}
	if !live {
		c.fail("%v succeeded, but epoch %d was live only at ticks %d..%d", o, t.epoch, t.start, t.end-1)
	}
	if o.kind == renewOp && (*o.lease != leases.Lease{Resource: resource, Holder: t.holder, Epoch: t.epoch, GrantedAt: t.start, ExpiresAt: next.expiresAt}) {
		c.fail("%v was answered with %+v", o, *o.lease)
	}
	t.end, t.sure, t.final = next.expiresAt, next.expiresAt, next
}

// grantOrder checks that epochs rise with the order of the grants: with
// their ticks, and with the order the test saw the replies in.
func (c *checker) grantOrder(resource string, byEpoch map[int64]*tenure, epochs []int64) {
	var lastSent *operation // the lower epoch's grant that was sent last
	for i, e := range epochs {
		g := byEpoch[e].grant
		if lastSent != nil && g.done < lastSent.sent {
			c.fail("epochs of %s out of grant order: %v got epoch %d and answered before %v was sent, which got a lower one", resource, g, e, lastSent)
		}
		if lastSent == nil || g.sent > lastSent.sent {
			lastSent = g
		}
		if i > 0 && g.tick < byEpoch[epochs[i-1]].grant.tick {
			c.fail("epochs of %s out of grant order: epoch %d at tick %d, epoch %d at tick %d", resource, epochs[i-1], byEpoch[epochs[i-1]].grant.tick, e, g.tick)
		}
	}
}

// topEpoch is the highest epoch of resource: its row's, which must be at
// least the highest granted.
func (c *checker) topEpoch(resource string, epochs []int64, row authorityRow, found bool) int64 {
	top := int64(0)
	if len(epochs) > 0 {
		top = epochs[len(epochs)-1]
	}
	switch {
	case !found && top > 0:
		c.fail("the authority has no row for %s, though it granted epochs up to %d", resource, top)
	case found && row.epoch < top:
		c.fail("the authority's row for %s is at epoch %d, below epoch %d it granted", resource, row.epoch, top)
	case found:
		top = row.epoch
	}
	return top
}

// gaps checks that every epoch up to top that nobody the test heard from
// was granted can be put down to a killed acquire, and returns every
// tenure known to have existed: the granted ones, and the killed acquires
// that must all have committed because the gap they fill is as wide as
// their number.
func (c *checker) gaps(resource string, byEpoch map[int64]*tenure, killed []*operation, top int64) []*tenure {
	var tenures []*tenure
	for e := int64(1); e <= top; e++ {
		if t := byEpoch[e]; t != nil {
			tenures = append(tenures, t)
			continue
		}
		lo := e
		for e < top && byEpoch[e+1] == nil {
			e++
		}
		could := killedBetween(killed, byEpoch[lo-1], byEpoch[e+1])
		missing := int(e - lo + 1)
		switch {
		case len(could) < missing:
			epochs := fmt.Sprintf("epoch %d", lo)
			if missing > 1 {
				epochs = fmt.Sprintf("epochs %d..%d", lo, e)
			}
			c.fail("%s of %s granted to nobody the test heard from, and only %d killed acquires could have taken them: %v",
				epochs, resource, len(could), could)
		case len(could) == missing:
			slices.SortFunc(could, func(a, b *operation) int { return cmp.Compare(a.tick, b.tick) })
			for i, k := range could {
				end := k.tick + k.ttl
				tenures = append(tenures, &tenure{epoch: lo + int64(i), holder: k.worker, start: k.tick, end: end, sure: end})
			}
		}
	}
	return tenures
}

// killedBetween returns the killed acquires that could have been granted
// an epoch between the tenures below and above (either may be nil): by
// their ticks, and by the order the test saw the grants in.
func killedBetween(killed []*operation, below, above *tenure) []*operation {
	var could []*operation
	for _, k := range killed {
		if below != nil && (k.tick < below.start || k.done < below.grant.sent) {
			continue
		}
		if above != nil && (k.tick > above.start || k.sent > above.grant.done) {
			continue
		}
		could = append(could, k)
	}
	return could
}

// overlaps checks that no two leases on resource were live at one tick.
func (c *checker) overlaps(resource string, tenures []*tenure) {
	for i := 1; i < len(tenures); i++ {
		a, b := tenures[i-1], tenures[i]
		if b.start < a.sure {
			c.fail("two live leases on %s at tick %d: epoch %d held by %s at ticks %d..%d, and epoch %d granted to %s at tick %d",
				resource, b.start, a.epoch, a.holder, a.start, a.sure-1, b.epoch, b.holder, b.start)
		}
	}
}

// finalRow checks the authority's row against the last tenure's
// operations (or a killed acquire, when the row's epoch is above every
// granted one).
func (c *checker) finalRow(resource string, row authorityRow, last *tenure, killed []*operation) {
	var allowed []authorityRow
	if last != nil {
		allowed = append(allowed, last.final)
		if last.maybe != nil {
			allowed = append(allowed, *last.maybe)
		}
	} else {
		for _, k := range killed {
			allowed = append(allowed, authorityRow{epoch: row.epoch, holder: k.worker, grantedAt: k.tick, expiresAt: k.tick + k.ttl, lastTick: k.tick})
		}
	}
	if !slices.Contains(allowed, row) {
		c.fail("the authority's final row for %s is %+v; the replies allow only %+v", resource, row, allowed)
	}
}
