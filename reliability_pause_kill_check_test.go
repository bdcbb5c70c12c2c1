package leases_test

// The checker of TestPauseAndKill: what every reply and the final rows must
// agree on, whatever was paused or killed. Operations run concurrently, so
// the only order it relies on is the one the test saw: an operation whose
// reply came before another was sent committed before that one began. An
// operation whose worker was killed in flight may or may not have
// committed; the checker allows for both.

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"

	"leases"
	"leases/sqlite"
)

// The operations a worker is asked for.
const (
	pkAcquire = "acquire"
	pkRenew   = "renew"
	pkRelease = "release"
	pkWrite   = "write"
	pkObserve = "observe"
	pkRead    = "read"
)

// pkOp is one request and what became of it.
type pkOp struct {
	worker   string
	kind     string
	resource string
	tick     int64        // acquire, renew, release
	ttl      int64        // acquire, renew
	epoch    int64        // write, observe; renew and release: held's
	value    string       // write
	held     leases.Lease // renew, release
	// sent and done number the moments the test sent the request and got
	// its reply or killed its worker, in one sequence with every other
	// operation's.
	sent, done int
	killed     bool   // its worker was killed while it was in flight
	refused    bool   // an acquire refused because the lease is held
	rejected   string // the error of a renewal, release or acquire refused as too late
	lease      *leases.Lease
	write      *leases.WriteResult
	record     leases.Record // read
	found      bool          // read
}

// committed reports whether the operation is known to have changed what
// it asked to change (or, for a write or observe, to have run).
func (o *pkOp) committed() bool { return !o.killed && !o.refused && o.rejected == "" }

func (o *pkOp) String() string {
	s := fmt.Sprintf("%s's %s of %s", o.worker, o.kind, o.resource)
	switch o.kind {
	case pkAcquire:
		s += fmt.Sprintf(" at tick %d for %d", o.tick, o.ttl)
	case pkRenew:
		s += fmt.Sprintf(" epoch %d at tick %d for %d", o.epoch, o.tick, o.ttl)
	case pkRelease:
		s += fmt.Sprintf(" epoch %d at tick %d", o.epoch, o.tick)
	case pkWrite:
		s += fmt.Sprintf(" epoch %d %q", o.epoch, o.value)
	case pkObserve:
		s += fmt.Sprintf(" epoch %d", o.epoch)
	}
	return s + fmt.Sprintf(" (events %d..%d)", o.sent, o.done)
}

// seen is the receiver's record an operation's reply showed.
func (o *pkOp) seen() leases.Record {
	if o.write != nil {
		return o.write.Record
	}
	return o.record
}

// pkFinal is what the file holds at the end.
type pkFinal struct {
	records   map[string]pkRecord
	rows      map[string]pkRow
	integrity string
}

type pkRecord struct {
	leases.Record
	found bool
}

// pkRow is an authority_leases row; holder is empty once released.
type pkRow struct {
	epoch                          int64
	holder                         string
	grantedAt, expiresAt, lastTick int64
}

// pkChecker collects every violation it finds.
type pkChecker struct{ problems []string }

func (c *pkChecker) fail(format string, args ...any) {
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
}

// checkPauseKill returns every violation that the operations and the
// final rows show, one line each.
func checkPauseKill(ops []*pkOp, final pkFinal) []string {
	var c pkChecker
	for _, resource := range pkResources {
		var mine []*pkOp
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
	grant *pkOp // nil when inferred from a killed acquire
	// final is the row it leaves behind; maybe the row it leaves if its
	// killed last renewal or release committed.
	final pkRow
	maybe *pkRow
}

// authority checks one resource's grants, renewals and releases, and the
// authority's final row.
func (c *pkChecker) authority(resource string, ops []*pkOp, row pkRow, found bool) {
	byEpoch := map[int64]*tenure{}
	var killedAcquires []*pkOp
	for _, o := range ops {
		switch {
		case o.kind == pkAcquire && o.killed:
			killedAcquires = append(killedAcquires, o)
		case o.kind == pkAcquire && o.committed():
			l := *o.lease
			if l.Resource != resource || l.Holder != o.worker || l.GrantedAt != o.tick || l.ExpiresAt != o.tick+o.ttl || l.Epoch < 1 {
				c.fail("%v was granted %+v", o, l)
			}
			if earlier, dup := byEpoch[l.Epoch]; dup {
				c.fail("epoch %d of %s granted twice: by %v and by %v", l.Epoch, resource, earlier.grant, o)
				continue
			}
			final := pkRow{epoch: l.Epoch, holder: l.Holder, grantedAt: l.GrantedAt, expiresAt: l.ExpiresAt, lastTick: o.tick}
			byEpoch[l.Epoch] = &tenure{epoch: l.Epoch, holder: l.Holder, start: l.GrantedAt, end: l.ExpiresAt, sure: l.ExpiresAt, grant: o, final: final}
		}
	}
	// Renewals and releases of one tenure all come from its holder, one at
	// a time, so the order they were sent in is the order they ran in.
	for _, o := range ops {
		if o.kind != pkRenew && o.kind != pkRelease || o.refused || o.rejected != "" {
			continue
		}
		t := byEpoch[o.epoch]
		if t == nil {
			if !o.killed {
				c.fail("%v succeeded, but nobody the test heard from was granted that epoch", o)
			}
			continue
		}
		live := o.tick >= t.start && o.tick < t.end
		// A renewal never moves the expiry earlier.
		next := pkRow{epoch: t.epoch, holder: t.holder, grantedAt: t.start, expiresAt: max(t.end, o.tick+o.ttl), lastTick: o.tick}
		if o.kind == pkRelease {
			next.holder, next.expiresAt = "", o.tick
		}
		if o.killed {
			if live { // else it was refused, had it run
				t.maybe = &next
				t.sure = min(t.sure, next.expiresAt)
			}
			continue
		}
		if !live {
			c.fail("%v succeeded, but epoch %d was live only at ticks %d..%d", o, t.epoch, t.start, t.end-1)
		}
		if o.kind == pkRenew && (*o.lease != leases.Lease{Resource: resource, Holder: t.holder, Epoch: t.epoch, GrantedAt: t.start, ExpiresAt: next.expiresAt}) {
			c.fail("%v was answered with %+v", o, *o.lease)
		}
		t.end, t.sure, t.final = next.expiresAt, next.expiresAt, next
	}

	epochs := slices.Sorted(maps.Keys(byEpoch))
	c.grantOrder(resource, byEpoch, epochs)
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
	tenures := c.gaps(resource, byEpoch, killedAcquires, top)
	c.overlaps(resource, tenures)
	if found {
		c.finalRow(resource, row, byEpoch[row.epoch], killedAcquires)
	}
}

// grantOrder checks that epochs rise with the order of the grants: with
// their ticks, and with the order the test saw the replies in.
func (c *pkChecker) grantOrder(resource string, byEpoch map[int64]*tenure, epochs []int64) {
	var lastSent *pkOp // the lower epoch's grant that was sent last
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

// gaps checks that every epoch up to top that nobody the test heard from
// was granted can be put down to a killed acquire, and returns every
// tenure known to have existed: the granted ones, and the killed acquires
// that must all have committed because the gap they fill is as wide as
// their number.
func (c *pkChecker) gaps(resource string, byEpoch map[int64]*tenure, killed []*pkOp, top int64) []*tenure {
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
		below, above := byEpoch[lo-1], byEpoch[e+1]
		var could []*pkOp
		for _, k := range killed {
			if below != nil && (k.tick < below.start || k.done < below.grant.sent) {
				continue
			}
			if above != nil && (k.tick > above.start || k.sent > above.grant.done) {
				continue
			}
			could = append(could, k)
		}
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
			slices.SortFunc(could, func(a, b *pkOp) int { return cmp.Compare(a.tick, b.tick) })
			for i, k := range could {
				end := k.tick + k.ttl
				tenures = append(tenures, &tenure{epoch: lo + int64(i), holder: k.worker, start: k.tick, end: end, sure: end})
			}
		}
	}
	return tenures
}

// overlaps checks that no two leases on resource were live at one tick.
func (c *pkChecker) overlaps(resource string, tenures []*tenure) {
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
func (c *pkChecker) finalRow(resource string, row pkRow, last *tenure, killed []*pkOp) {
	var allowed []pkRow
	if last != nil {
		allowed = append(allowed, last.final)
		if last.maybe != nil {
			allowed = append(allowed, *last.maybe)
		}
	} else {
		for _, k := range killed {
			allowed = append(allowed, pkRow{epoch: row.epoch, holder: k.worker, grantedAt: k.tick, expiresAt: k.tick + k.ttl, lastTick: k.tick})
		}
	}
	if !slices.Contains(allowed, row) {
		c.fail("the authority's final row for %s is %+v; the replies allow only %+v", resource, row, allowed)
	}
}

// receiver checks one resource's writes, observes and reads, and the
// receiver's final record.
func (c *pkChecker) receiver(resource string, ops []*pkOp, final pkRecord) {
	var answered, killed []*pkOp
	for _, o := range ops {
		switch {
		case o.kind != pkWrite && o.kind != pkObserve && o.kind != pkRead:
		case o.killed:
			killed = append(killed, o)
		default:
			answered = append(answered, o)
			c.reply(o)
		}
	}
	c.fence(resource, answered)

	// One value per epoch; the final record is the highest epoch's.
	acceptedAt := map[int64]*pkOp{}
	var best *pkOp // the accepted write with the highest epoch
	highest := int64(0)
	for _, o := range answered {
		highest = max(highest, o.seen().Epoch)
		if o.kind != pkWrite || o.write.Outcome != leases.Accepted {
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
	fenceOK := final.Epoch == highest
	valueOK := best == nil && final.ValueEpoch == 0 || best != nil && final.ValueEpoch == best.epoch && final.Value == best.value
	for _, k := range killed {
		fenceOK = fenceOK || final.Epoch == k.epoch && k.epoch > highest
		valueOK = valueOK || k.kind == pkWrite && final.ValueEpoch == k.epoch && final.Value == k.value && (best == nil || k.epoch > best.epoch)
	}
	if !fenceOK || !valueOK {
		c.fail("the receiver's final record for %s is %+v (found %t); the replies say epoch %d and the value of %v, give or take %d killed operations",
			resource, final.Record, final.found, highest, best, len(killed))
	}
}

// reply checks that a write's or observe's outcome agrees with the record
// its reply shows.
func (c *pkChecker) reply(o *pkOp) {
	if o.write == nil {
		return
	}
	r, e := o.write.Record, o.epoch
	var ok bool
	switch o.write.Outcome {
	case leases.Accepted:
		ok = o.kind == pkWrite && r == leases.Record{Epoch: e, ValueEpoch: e, Value: o.value} ||
			o.kind == pkObserve && r.Epoch == e && r.ValueEpoch < e
	case leases.Replay:
		ok = o.kind == pkWrite && r == leases.Record{Epoch: e, ValueEpoch: e, Value: o.value} ||
			o.kind == pkObserve && r.Epoch == e
	case leases.Conflict:
		ok = o.kind == pkWrite && r.Epoch == e && r.ValueEpoch == e && r.Value != o.value
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
func (c *pkChecker) fence(resource string, ops []*pkOp) {
	bySent := slices.SortedFunc(slices.Values(ops), func(a, b *pkOp) int { return cmp.Compare(a.sent, b.sent) })
	byDone := slices.SortedFunc(slices.Values(ops), func(a, b *pkOp) int { return cmp.Compare(a.done, b.done) })
	var highest *pkOp // among the replies received so far, the one with the highest epoch
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
		case o.kind == pkWrite && o.write.Outcome == leases.Accepted && o.epoch < fence:
			c.fail("%v was accepted below epoch %d, which the receiver had committed before (%v)", o, fence, highest)
		case o.seen().Epoch < fence:
			c.fail("the fence of %s went down: %v saw epoch %d after %v had seen %d", resource, o, o.seen().Epoch, highest, fence)
		}
	}
}

// readFinalRows reads what the file holds once every worker has exited,
// through a store of the test's own: the receiver's record of every
// resource, the authority's rows, and the integrity check.
func readFinalRows(t *testing.T, ctx context.Context, path string) pkFinal {
	t.Helper()
	store, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	final := pkFinal{records: map[string]pkRecord{}, rows: map[string]pkRow{}}
	for _, resource := range pkResources {
		record, found, err := store.Receiver(leases.Fenced).Read(ctx, resource)
		if err != nil {
			t.Fatal(err)
		}
		final.records[resource] = pkRecord{record, found}
	}
	if final.integrity, err = store.IntegrityCheck(ctx); err != nil {
		t.Fatal(err)
	}
	db := openFileDirectly(t, path)
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT resource, epoch, holder, granted_at, expires_at, last_tick FROM authority_leases`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var resource string
		var row pkRow
		var holder sql.NullString
		if err := rows.Scan(&resource, &row.epoch, &holder, &row.grantedAt, &row.expiresAt, &row.lastTick); err != nil {
			t.Fatal(err)
		}
		row.holder = holder.String
		final.rows[resource] = row
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		t.Fatal(err)
	}
	return final
}
