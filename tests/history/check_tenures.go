package history

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
)

// The authority's tenures, rebuilt from every answer it gave: grants,
// renewals and releases of each resource. Calls run concurrently, so the
// only order the check relies on is the one the records show: a call
// that returned before another was made took effect before that one
// began. A call whose outcome is unknown (it said so, or its worker was
// killed during it) may or may not have taken effect; the check allows
// for both.

// tenure is one epoch's lease: granted, maybe renewed, maybe released.
type tenure struct {
	epoch      int64
	holder     string
	start, end int64 // live at ticks start .. end-1, as the answers show
	// could is the latest end it may have had (a renewal of unknown
	// outcome may have moved it later); sure the end it certainly had
	// (a release of unknown outcome may have ended it sooner).
	could, sure int64
	// grant is the acquire that began it: answered, or one of unknown
	// outcome that a later answer proved or the epochs require.
	grant *Op
	// final is the row it leaves behind; maybe the row it leaves if its
	// last renewal or release, of unknown outcome, took effect.
	final LeaseRow
	maybe *LeaseRow
}

// tenures checks every resource's tenures: each grant is what its
// acquire asked for, a renewal or release succeeds only while its lease
// is live and answers it, epochs rise with the order of the grants, the
// lessor's last epoch is at least every granted one and every epoch up
// to it was granted to a caller the records show or can be put down to
// an acquire of unknown outcome, no two leases are live at one tick, and
// the authority's final row (where the test read it) is one the answers
// allow. Where the server chose the ticks (Record.ServerTime), only the
// epochs and their order are checked; the rest is stepServer's, in the
// model.
func tenures(h *History) []string {
	var c checker
	byResource := map[string][]*Op{}
	for _, op := range h.opsOf("acquire") {
		byResource[op.Call.Resource] = append(byResource[op.Call.Resource], op)
	}
	for _, op := range h.callsOf("renew", "release") {
		byResource[op.Call.Resource] = append(byResource[op.Call.Resource], op)
	}
	for r := range h.Epochs {
		if _, ok := byResource[r]; !ok {
			byResource[r] = nil
		}
	}
	for _, r := range slices.Sorted(maps.Keys(byResource)) {
		c.authority(h, r, byResource[r])
	}
	return c.problems
}

// checker collects every violation it finds.
type checker struct{ problems []string }

func (c *checker) fail(format string, args ...any) {
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
}

// lessorView is what the check knows of one resource.
type lessorView struct {
	h        *History
	resource string
	ticked   bool // every call came with the caller's tick
	byEpoch  map[int64]*tenure
	unsure   []*Op // acquires of unknown outcome not yet put down to an epoch
	// unplaced are the renewals and releases of unknown outcome of an
	// epoch no answer showed granted yet: gaps applies them to the
	// tenure it puts down to an acquire of unknown outcome.
	unplaced []*Op
}

// authority checks one resource's acquires, renewals and releases (ops:
// the acquires first, then the renewals and releases in the order of
// their calls) and its final row.
func (c *checker) authority(h *History, resource string, ops []*Op) {
	v := &lessorView{h: h, resource: resource, ticked: true, byEpoch: map[int64]*tenure{}}
	for _, o := range ops {
		v.ticked = v.ticked && !o.Call.ServerTime
	}
	for _, o := range ops {
		if o.Call.Op == "acquire" {
			c.grant(v, o)
		}
	}
	// Renewals and releases of one tenure all come from its holder, one
	// at a time, so the order of their calls is the order they ran in.
	for _, o := range ops {
		if o.Call.Op != "acquire" && (o.Result() == ResultOK || maybe(o)) {
			c.change(v, o)
		}
	}
	epochs := slices.Sorted(maps.Keys(v.byEpoch))
	c.grantOrder(v, epochs)
	row, found := h.Epochs[resource]
	top := c.topEpoch(v, epochs, row, found)
	all := c.gaps(v, top)
	if v.ticked {
		c.overlaps(v, all)
	}
	if final, ok := h.Leases[resource]; ok && v.ticked {
		c.finalRow(v, final)
	}
}

// maybe reports whether o's outcome is unknown: it said so, or its
// worker was killed during it.
func maybe(o *Op) bool { return o.Result() == ResultUnknown || o.Result() == ResultKilled }

// effectBy is the moment by which o took effect, if it did: its return,
// or its kill where that ends a call's effects; never, as far as the
// records tell, for an outcome that is unknown.
func (v *lessorView) effectBy(o *Op) int64 {
	switch {
	case o.Result() == ResultKilled && o.Killed != nil && v.h.KillEndsCalls:
		return o.Killed.T
	case maybe(o):
		return math.MaxInt64
	}
	return o.Ret.T
}

// grant adds the tenure an answered grant began, or the acquire to the
// unsure ones if its outcome is unknown, checking that the lease is what
// the acquire asked for. A second grant of one epoch is
// epochsGrantedOnce's.
func (c *checker) grant(v *lessorView, o *Op) {
	switch {
	case maybe(o):
		v.unsure = append(v.unsure, o)
		return
	case o.Result() != ResultOK:
		return
	}
	l := *o.Ret.Lease
	asked := l.Resource == v.resource && l.Holder == o.Call.Holder && l.Epoch >= 1
	if v.ticked {
		asked = asked && l.GrantedAt == o.Call.Now && l.ExpiresAt == o.Call.Now+o.Call.TTL
	}
	if !asked {
		c.fail("%v was granted %+v", o, l)
	}
	if v.byEpoch[l.Epoch] != nil {
		return
	}
	final := LeaseRow{Epoch: l.Epoch, Holder: l.Holder, GrantedAt: l.GrantedAt, ExpiresAt: l.ExpiresAt, LastTick: l.GrantedAt}
	v.byEpoch[l.Epoch] = &tenure{epoch: l.Epoch, holder: l.Holder, start: l.GrantedAt, end: l.ExpiresAt,
		could: l.ExpiresAt, sure: l.ExpiresAt, grant: o, final: final}
}

// proven is the tenure of o's epoch that an acquire of unknown outcome
// by o's holder began, now that o, a renewal or release of that epoch,
// succeeded; nil if no such acquire was made before o. Of several, it is
// the last one made before o: a holder's calls run one at a time, and it
// calls for a lease only after it is done with the last one (a Wait
// releases what an acquire of unknown outcome may have granted before
// it acquires again), so o is about the lease of its holder's latest
// acquire. Earlier ones may have named the same epoch and not taken it:
// a Wait's acquire timed out, its release found the epoch not granted,
// and its next acquire named that epoch again.
func (v *lessorView) proven(o *Op) *tenure {
	i := -1
	for j, k := range v.unsure {
		l := k.wouldBe()
		if k.Call.Holder != o.Call.Holder || k.Call.T > o.Call.T || l.Epoch != 0 && l.Epoch != o.Call.Epoch {
			continue
		}
		if i < 0 || k.Call.T > v.unsure[i].Call.T {
			i = j
		}
	}
	if i < 0 {
		return nil
	}
	k, l := v.unsure[i], v.unsure[i].wouldBe()
	v.unsure = slices.Delete(v.unsure, i, i+1)
	final := LeaseRow{Epoch: o.Call.Epoch, Holder: k.Call.Holder, GrantedAt: l.GrantedAt, ExpiresAt: l.ExpiresAt, LastTick: l.GrantedAt}
	t := &tenure{epoch: o.Call.Epoch, holder: k.Call.Holder, start: l.GrantedAt, end: l.ExpiresAt,
		could: l.ExpiresAt, sure: l.ExpiresAt, grant: k, final: final}
	v.byEpoch[t.epoch] = t
	return t
}

// wouldBe is the lease an acquire of unknown outcome would have granted:
// the one its answer names, or, with no answer, the one its tick and
// time-to-live make.
func (o *Op) wouldBe() wouldBe {
	if o.Ret != nil && o.Ret.Lease != nil {
		return wouldBe{Epoch: o.Ret.Lease.Epoch, GrantedAt: o.Ret.Lease.GrantedAt, ExpiresAt: o.Ret.Lease.ExpiresAt}
	}
	return wouldBe{GrantedAt: o.Call.Now, ExpiresAt: o.Call.Now + o.Call.TTL}
}

// wouldBe is what an acquire of unknown outcome would have granted: its
// epoch (0 where no answer names it) and its ticks.
type wouldBe struct{ Epoch, GrantedAt, ExpiresAt int64 }

// change applies a renewal or release o, answered or of unknown outcome,
// to its tenure, checking that an answered one found the lease live and
// answered it.
func (c *checker) change(v *lessorView, o *Op) {
	t := v.byEpoch[o.Call.Epoch]
	if t == nil && !maybe(o) {
		t = v.proven(o)
	}
	if t == nil {
		if !maybe(o) {
			c.fail("%v succeeded, but nobody the records show was granted that epoch", o)
			return
		}
		v.unplaced = append(v.unplaced, o)
		return
	}
	if !v.ticked {
		return // the server chose the ticks; the model checks the rest
	}
	if maybe(o) {
		t.mayChange(o)
		return
	}
	tick := o.Call.Now
	live := tick >= t.start && tick < t.could
	next := t.after(o)
	if !live {
		c.fail("%v succeeded, but epoch %d was live only at ticks %d..%d", o, t.epoch, t.start, t.could-1)
	}
	if o.Call.Op == "renew" {
		l := o.Ret.Lease
		wrong := l == nil || l.Resource != v.resource || l.Holder != t.holder || l.Epoch != t.epoch || l.GrantedAt != t.start ||
			l.ExpiresAt < next.ExpiresAt || l.ExpiresAt > max(t.could, tick+o.Call.TTL)
		if wrong {
			c.fail("%v was answered with %+v", o, l)
		} else {
			next.ExpiresAt = l.ExpiresAt
		}
	}
	t.end, t.could, t.sure, t.final, t.maybe = next.ExpiresAt, next.ExpiresAt, next.ExpiresAt, next, nil
}

// after is the row o, a renewal or release of t's epoch, leaves if it
// takes effect. A renewal never moves the expiry earlier.
func (t *tenure) after(o *Op) LeaseRow {
	tick := o.Call.Now
	next := LeaseRow{Epoch: t.epoch, Holder: t.holder, GrantedAt: t.start, ExpiresAt: max(t.end, tick+o.Call.TTL), LastTick: tick}
	if o.Call.Op == "release" {
		next.Holder, next.ExpiresAt = "", tick
	}
	return next
}

// mayChange applies o, a renewal or release of t's epoch of unknown
// outcome, to t: had it run while the lease was live, it may have moved
// the expiry later (a renewal) or ended the lease sooner (a release).
func (t *tenure) mayChange(o *Op) {
	if tick := o.Call.Now; tick < t.start || tick >= t.could {
		return // it was refused, had it run
	}
	next := t.after(o)
	t.maybe = &next
	t.sure = min(t.sure, next.ExpiresAt)
	t.could = max(t.could, next.ExpiresAt)
}

// grantOrder checks that epochs rise with the order of the grants: with
// their ticks, and with the order the records show the answers in.
func (c *checker) grantOrder(v *lessorView, epochs []int64) {
	var lastSent *Op // the lower epoch's answered grant that was made last
	for i, e := range epochs {
		g := v.byEpoch[e].grant
		if g.Result() != ResultOK {
			continue // proven only later: its answer is not known
		}
		if lastSent != nil && g.Ret.T < lastSent.Call.T {
			c.fail("epochs of %s out of grant order: %v got epoch %d and answered before %v was made, which got a lower one", v.resource, g, e, lastSent)
		}
		if lastSent == nil || g.Call.T > lastSent.Call.T {
			lastSent = g
		}
		if below := v.byEpoch[epochs[max(i-1, 0)]]; i > 0 && v.byEpoch[e].start < below.start {
			c.fail("epochs of %s out of grant order: epoch %d at tick %d, epoch %d at tick %d", v.resource, below.epoch, below.start, e, v.byEpoch[e].start)
		}
	}
}

// topEpoch is the highest epoch of the resource: its row's, which must be
// at least the highest granted.
func (c *checker) topEpoch(v *lessorView, epochs []int64, row int64, found bool) int64 {
	top := int64(0)
	if len(epochs) > 0 {
		top = epochs[len(epochs)-1]
	}
	switch {
	case !found && top > 0:
		c.fail("the authority has no row for %s, though it granted epochs up to %d", v.resource, top)
	case found && row < top:
		c.fail("the authority's row for %s is at epoch %d, below epoch %d it granted", v.resource, row, top)
	case found:
		top = row
	}
	return top
}

// gaps checks that every epoch up to top that nobody the records show
// was granted can be put down to an acquire of unknown outcome, and
// returns every tenure known to have existed: the granted ones, and the
// acquires that must all have taken effect because the gap they fill is
// as wide as their number.
func (c *checker) gaps(v *lessorView, top int64) []*tenure {
	var tenures []*tenure
	for e := int64(1); e <= top; e++ {
		if t := v.byEpoch[e]; t != nil {
			tenures = append(tenures, t)
			continue
		}
		lo := e
		for e < top && v.byEpoch[e+1] == nil {
			e++
		}
		could := v.unsureBetween(v.byEpoch[lo-1], v.byEpoch[e+1])
		missing := int(e - lo + 1)
		switch {
		case len(could) < missing:
			epochs := fmt.Sprintf("epoch %d", lo)
			if missing > 1 {
				epochs = fmt.Sprintf("epochs %d..%d", lo, e)
			}
			c.fail("%s of %s granted to nobody the records show, and only %d acquires of unknown outcome could have taken them: %v",
				epochs, v.resource, len(could), could)
		case len(could) == missing:
			slices.SortFunc(could, func(a, b *Op) int { return cmp.Compare(a.Call.Now, b.Call.Now) })
			for i, k := range could {
				l := k.wouldBe()
				t := &tenure{epoch: lo + int64(i), holder: k.Call.Holder, start: l.GrantedAt, end: l.ExpiresAt,
					could: l.ExpiresAt, sure: l.ExpiresAt, grant: k}
				// Its holder's renewals and releases of that epoch,
				// of unknown outcome too, found no tenure when they
				// were applied: a release killed on its way may have
				// ended it before its expiry.
				for _, o := range v.unplaced {
					if v.ticked && o.Call.Epoch == t.epoch && o.Call.Holder == t.holder && o.Call.T > k.Call.T {
						t.mayChange(o)
					}
				}
				tenures = append(tenures, t)
			}
		}
	}
	return tenures
}

// unsureBetween returns the acquires of unknown outcome that could have
// been granted an epoch between the tenures below and above (either may
// be nil): by the epoch an answer names, by their ticks, and by the order
// the records show the grants in.
func (v *lessorView) unsureBetween(below, above *tenure) []*Op {
	var could []*Op
	for _, k := range v.unsure {
		if e := k.wouldBe().Epoch; e != 0 && (below != nil && e <= below.epoch || above != nil && e >= above.epoch) {
			continue
		}
		if below != nil && (v.ticked && k.Call.Now < below.start || v.effectBy(k) < below.grant.Call.T) {
			continue
		}
		if above != nil && (v.ticked && k.Call.Now > above.start || above.grant.Ret != nil && k.Call.T > above.grant.Ret.T) {
			continue
		}
		could = append(could, k)
	}
	return could
}

// overlaps checks that no two leases on the resource were live at one
// tick.
func (c *checker) overlaps(v *lessorView, tenures []*tenure) {
	for i := 1; i < len(tenures); i++ {
		a, b := tenures[i-1], tenures[i]
		if b.start < a.sure {
			c.fail("two live leases on %s at tick %d: epoch %d held by %s at ticks %d..%d, and epoch %d granted to %s at tick %d",
				v.resource, b.start, a.epoch, a.holder, a.start, a.sure-1, b.epoch, b.holder, b.start)
		}
	}
}

// finalRow checks the authority's final row against the last tenure's
// calls (or an acquire of unknown outcome, when the row's epoch is above
// every granted one).
func (c *checker) finalRow(v *lessorView, row LeaseRow) {
	var allowed []LeaseRow
	if last := v.byEpoch[row.Epoch]; last != nil {
		allowed = append(allowed, last.final)
		if last.maybe != nil {
			allowed = append(allowed, *last.maybe)
		}
	} else {
		for _, k := range v.unsure {
			l := k.wouldBe()
			allowed = append(allowed, LeaseRow{Epoch: row.Epoch, Holder: k.Call.Holder, GrantedAt: l.GrantedAt, ExpiresAt: l.ExpiresAt, LastTick: l.GrantedAt})
		}
	}
	if !slices.Contains(allowed, row) {
		c.fail("the authority's final row for %s is %+v; the answers allow only %+v", v.resource, row, allowed)
	}
}
