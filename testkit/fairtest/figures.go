package fairtest

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// Figures are what a run measured.
type Figures struct {
	// Grants is how many grants the run saw.
	Grants int
	// Handoffs are, for each grant that followed a release, the time
	// from the release's request (sent, not answered: an upper bound)
	// to the grant's answer in the next holder's process, in grant
	// order.
	Handoffs []time.Duration
	// Expired counts the grants that followed no release seen (a lease
	// that ran out, or the run's first grant).
	Expired int
	// MaxWaited is the most grants to other holders during one wait
	// (from its first refusal to its grant): with n processes always
	// waiting again at once, n-1 in arrival order. MaxOvertaken is the
	// most, during one wait, to holders that began to wait after it did
	// (see figures): 0 in arrival order.
	MaxWaited, MaxOvertaken int
	// Away counts the waits left out of MaxOvertaken: their holder was
	// away from the lessor, between a refusal's answer and its next
	// acquire, for half the TTL or longer (a machine that did not run
	// it). A refused waiter keeps its place for half the TTL at least
	// (rules.Place, rules.Refresh), and one that stays away longer may
	// lose it: a waiter that does not come back has gone away, and the
	// line no longer waits for it.
	Away int
	// TTL is the time-to-live every contender asked for.
	TTL time.Duration
}

// Quantile is the handoff time below which a fraction q of the handoffs
// fall (the nearest rank); 0 when there were none.
func (f Figures) Quantile(q float64) time.Duration {
	if len(f.Handoffs) == 0 {
		return 0
	}
	sorted := slices.Clone(f.Handoffs)
	slices.Sort(sorted)
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// String is the figures on one line, as docs/performance.md shows them.
func (f Figures) String() string {
	return fmt.Sprintf("%d grants, %d after a release: handoff p50 %v, p99 %v, max %v; longest wait %d tenures, most overtaken %d, waits away %d",
		f.Grants, len(f.Handoffs), round(f.Quantile(0.5)), round(f.Quantile(0.99)), round(f.Quantile(1)),
		f.MaxWaited, f.MaxOvertaken, f.Away)
}

func round(d time.Duration) time.Duration { return d.Round(100 * time.Microsecond) }

// grant is one grant with the wait it ended.
type grant struct {
	holder string
	epoch  int64
	at     int64 // granted at
	called int64 // the wait's first acquire was sent at
	// waited says that the wait was refused first, and refused when that
	// refusal was answered.
	waited  bool
	refused int64
	away    int64 // the wait's longest time between a refusal's answer and the next acquire
}

// figures computes the figures of a run's events. A waiter is passed
// over by the grants to others that came after its first refusal and
// before its own grant; it is overtaken by those of them whose holder
// sent its first acquire of that wait only after the waiter's first
// refusal was answered (so certainly later: the processes' scheduling
// cannot make it look so), a holder that released and acquired again at
// once among them.
func figures(events []event, ttl time.Duration) Figures {
	var grants []grant
	waiting := map[string]event{}
	released := map[int64]int64{} // epoch: release sent at
	for _, e := range events {
		switch e.Kind {
		case "wait":
			waiting[e.Holder] = e
		case "grant":
			w, ok := waiting[e.Holder]
			delete(waiting, e.Holder)
			grants = append(grants, grant{holder: e.Holder, epoch: e.Epoch, at: e.T, called: e.Called, waited: ok, refused: w.T, away: e.Away})
		case "release":
			released[e.Epoch] = e.T
		}
	}
	slices.SortFunc(grants, func(a, b grant) int { return int(a.epoch - b.epoch) })
	f := Figures{Grants: len(grants), TTL: ttl}
	for i, g := range grants {
		if r, ok := released[prevEpoch(grants, i)]; ok && i > 0 {
			f.Handoffs = append(f.Handoffs, time.Duration(g.at-r))
		} else {
			f.Expired++
		}
		if !g.waited {
			continue
		}
		if time.Duration(g.away) >= ttl/2 {
			f.Away++
			continue
		}
		waited, overtaken := 0, 0
		for _, o := range grants[:i] {
			if o.holder != g.holder && o.at > g.refused {
				waited++
				if o.called > g.refused {
					overtaken++
				}
			}
		}
		f.MaxWaited, f.MaxOvertaken = max(f.MaxWaited, waited), max(f.MaxOvertaken, overtaken)
	}
	return f
}

// prevEpoch is the epoch of the grant before grants[i], 0 for the first.
func prevEpoch(grants []grant, i int) int64 {
	if i == 0 {
		return 0
	}
	return grants[i-1].epoch
}

// Check fails t when the figures show the lessor unfair or slow to hand
// over: a waiter overtaken by more than three holders that began to wait
// after it (of the waits that kept coming back: see Away), or a median handoff of half the time-to-live or more (a
// waiter that hears of no release waits until the lease could have run
// out, a whole time-to-live; one that hears of it waits for a round trip
// or a poll, milliseconds, which a busy machine stretches far less).
func Check(t *testing.T, f Figures) {
	t.Helper()
	if f.MaxOvertaken > 3 {
		t.Errorf("a waiter was overtaken by %d holders that began to wait after it; want at most 3", f.MaxOvertaken)
	}
	if p50 := f.Quantile(0.5); p50 >= f.TTL/2 {
		t.Errorf("the median handoff took %v, half the time-to-live (%v) or more: waiters do not hear of releases", p50, f.TTL)
	}
}
