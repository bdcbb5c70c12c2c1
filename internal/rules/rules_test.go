package rules

import (
	"errors"
	"math"
	"strings"
	"testing"

	"leases"
)

// The fixtures: resource "r", whose epoch 3 was granted to "a" at tick
// 10 for 10 ticks (live at 19, expired at 20) and last changed at tick 12.
var (
	live     = LeaseRow{Epoch: 3, Holder: "a", Held: true, GrantedAt: 10, ExpiresAt: 20, LastTick: 12}
	released = LeaseRow{Epoch: 3, Holder: "", Held: false, GrantedAt: 10, ExpiresAt: 15, LastTick: 15}
	held     = leases.Lease{Resource: "r", Holder: "a", Epoch: 3, GrantedAt: 10, ExpiresAt: 20}
)

// sentinels are the errors a caller tells apart; kinds says which of them
// err matches, so that a case says every kind its error must have and
// fails on one more (an expiry that also reads as "not the holder").
var sentinels = []error{leases.ErrInvalidInput, leases.ErrLeaseHeld, leases.ErrNotHolder,
	leases.ErrLeaseExpired, leases.ErrTickBackwards, leases.ErrNotLive, leases.ErrOutcomeUnknown}

// checkSays is checkKinds for an error whose message must also say says.
func checkSays(t *testing.T, err error, says string, want ...error) {
	t.Helper()
	checkKinds(t, err, want...)
	if err != nil && !strings.Contains(err.Error(), says) {
		t.Errorf("%q does not say %q", err, says)
	}
}

func checkKinds(t *testing.T, err error, want ...error) {
	t.Helper()
	if len(want) == 0 {
		if err != nil {
			t.Fatalf("error %v; want none", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("no error; want one matching %v", want)
	}
	for _, s := range sentinels {
		wanted := false
		for _, w := range want {
			wanted = wanted || w == s
		}
		if errors.Is(err, s) != wanted {
			t.Errorf("%q matches %v: %v, want %v", err, s, !wanted, wanted)
		}
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("%q is more than one line", err)
	}
}

// on is what a decision about a held lease is made on: the resource's row
// (found false when there is none), the lease held, and the tick.
type on struct {
	row   LeaseRow
	found bool
	held  leases.Lease
	now   int64
}

// with is the lease held with another holder or epoch.
func with(holder string, epoch int64) leases.Lease {
	l := held
	l.Holder, l.Epoch = holder, epoch
	return l
}

// An acquire is granted on a resource never leased (epoch 1), released,
// or expired (the next epoch), from the expiry tick on; it is refused
// while the lease is live, to its own holder too, and at a tick before
// the row's last change.
func TestAcquire(t *testing.T) {
	for _, c := range []struct {
		name   string
		row    LeaseRow
		found  bool
		holder string
		now    int64
		want   LeaseRow // the row stored, when granted
		err    []error
	}{
		{"never leased: epoch 1, expiring ttl ticks on", LeaseRow{}, false, "b", 5,
			LeaseRow{Epoch: 1, Holder: "b", Held: true, GrantedAt: 5, ExpiresAt: 12, LastTick: 5}, nil},
		{"never leased, at tick 0", LeaseRow{}, false, "b", 0,
			LeaseRow{Epoch: 1, Holder: "b", Held: true, GrantedAt: 0, ExpiresAt: 7, LastTick: 0}, nil},
		{"live at its last tick t+d-1: held", live, true, "b", 19, LeaseRow{}, []error{leases.ErrLeaseHeld}},
		{"expired at its expiry tick t+d: the next epoch", live, true, "b", 20,
			LeaseRow{Epoch: 4, Holder: "b", Held: true, GrantedAt: 20, ExpiresAt: 27, LastTick: 20}, nil},
		{"live: its own holder is refused too", live, true, "a", 19, LeaseRow{}, []error{leases.ErrLeaseHeld}},
		{"expired: its own holder gets the next epoch", live, true, "a", 20,
			LeaseRow{Epoch: 4, Holder: "a", Held: true, GrantedAt: 20, ExpiresAt: 27, LastTick: 20}, nil},
		{"released, at the release's tick: the next epoch", released, true, "b", 15,
			LeaseRow{Epoch: 4, Holder: "b", Held: true, GrantedAt: 15, ExpiresAt: 22, LastTick: 15}, nil},
		{"released, a tick before the release: backwards", released, true, "b", 14, LeaseRow{}, []error{leases.ErrTickBackwards}},
		{"live, a tick before its last change: backwards, not held", live, true, "b", 11, LeaseRow{}, []error{leases.ErrTickBackwards}},
		{"live, at its last change: held", live, true, "b", 12, LeaseRow{}, []error{leases.ErrLeaseHeld}},
	} {
		t.Run(c.name, func(t *testing.T) {
			row, lease, err := Acquire(c.row, c.found, "r", c.holder, c.now, 7)
			checkKinds(t, err, c.err...)
			if row != c.want {
				t.Errorf("row stored %+v; want %+v", row, c.want)
			}
			if want := c.want.Lease("r"); err == nil && lease != want {
				t.Errorf("lease %+v; want %+v", lease, want)
			}
			var heldErr *leases.HeldError
			if errors.As(err, &heldErr) && (heldErr.Live != c.row.Lease("r") || heldErr.At != c.now) {
				t.Errorf("refusal names %+v at %d; want %+v at %d", heldErr.Live, heldErr.At, c.row.Lease("r"), c.now)
			}
			var back *leases.BackwardsError
			if errors.As(err, &back) && (back.Tick != c.now || back.Last != c.row.LastTick || back.Resource != "r") {
				t.Errorf("refusal names %+v; want tick %d, last %d", back, c.now, c.row.LastTick)
			}
		})
	}
}

// A renewal extends the live lease of its holder up to its last tick
// (never to an expiry earlier than the one it had), and is refused once
// it expired, for a released epoch, another holder, another epoch, a
// resource never leased, and a tick before the row's last change.
func TestRenew(t *testing.T) {
	renewed := func(expires, last int64) LeaseRow {
		r := live
		r.ExpiresAt, r.LastTick = expires, last
		return r
	}
	for _, c := range []struct {
		name string
		on   on
		ttl  int64
		want LeaseRow
		err  []error
		says string
	}{
		{"at its last tick t+d-1: extended from now", on{live, true, held, 19}, 10, renewed(29, 19), nil, ""},
		{"at its expiry tick t+d: expired", on{live, true, held, 20}, 10, LeaseRow{}, []error{leases.ErrLeaseExpired}, "expired at tick 20"},
		{"that would move the expiry earlier: the expiry stays", on{live, true, held, 13}, 2, renewed(20, 13), nil, ""},
		{"to exactly the expiry it had: unchanged but for the tick", on{live, true, held, 13}, 7, renewed(20, 13), nil, ""},
		{"one tick past the expiry it had: moved", on{live, true, held, 13}, 8, renewed(21, 13), nil, ""},
		{"at the row's last change", on{live, true, held, 12}, 10, renewed(22, 12), nil, ""},
		{"a tick before the row's last change: backwards", on{live, true, held, 11}, 10, LeaseRow{}, []error{leases.ErrTickBackwards}, ""},
		{"a released epoch: not the holder", on{released, true, held, 16}, 10, LeaseRow{}, []error{leases.ErrNotHolder}, "epoch 3 of \"r\" was released at tick 15"},
		{"another holder's row at the same epoch", on{live, true, with("b", 3), 13}, 10, LeaseRow{}, []error{leases.ErrNotHolder}, ""},
		{"a lower epoch than the row's", on{live, true, with("a", 2), 13}, 10, LeaseRow{}, []error{leases.ErrNotHolder}, ""},
		{"a higher epoch than the row's", on{live, true, with("a", 4), 13}, 10, LeaseRow{}, []error{leases.ErrNotHolder}, ""},
		{"a resource never leased", on{LeaseRow{}, false, held, 13}, 10, LeaseRow{}, []error{leases.ErrNotHolder}, "was never leased"},
	} {
		t.Run(c.name, func(t *testing.T) {
			row, lease, err := Renew(c.on.row, c.on.found, c.on.held, c.on.now, c.ttl)
			checkSays(t, err, c.says, c.err...)
			if row != c.want {
				t.Errorf("row stored %+v; want %+v", row, c.want)
			}
			if want := c.want.Lease("r"); err == nil && lease != want {
				t.Errorf("lease %+v; want %+v", lease, want)
			}
		})
	}
}

// A release ends its holder's live lease at once, up to its last tick,
// keeping the epoch (never reused), and is refused as a renewal is.
func TestRelease(t *testing.T) {
	for _, c := range []struct {
		name string
		on   on
		want LeaseRow
		err  []error
		says string
	}{
		{"at its last tick t+d-1: released at now", on{live, true, held, 19},
			LeaseRow{Epoch: 3, GrantedAt: 10, ExpiresAt: 19, LastTick: 19}, nil, ""},
		{"at the row's last change", on{live, true, held, 12},
			LeaseRow{Epoch: 3, GrantedAt: 10, ExpiresAt: 12, LastTick: 12}, nil, ""},
		{"at its expiry tick t+d: expired", on{live, true, held, 20}, LeaseRow{}, []error{leases.ErrLeaseExpired}, ""},
		{"a tick before the row's last change: backwards", on{live, true, held, 11}, LeaseRow{}, []error{leases.ErrTickBackwards}, ""},
		{"released already: not the holder", on{released, true, held, 16}, LeaseRow{}, []error{leases.ErrNotHolder}, "was released at tick 15"},
		{"another holder's row", on{live, true, with("b", 3), 13}, LeaseRow{}, []error{leases.ErrNotHolder}, ""},
		{"an older epoch", on{live, true, with("a", 2), 13}, LeaseRow{}, []error{leases.ErrNotHolder}, ""},
		{"a resource never leased", on{LeaseRow{}, false, held, 13}, LeaseRow{}, []error{leases.ErrNotHolder}, "was never leased"},
	} {
		t.Run(c.name, func(t *testing.T) {
			row, err := Release(c.on.row, c.on.found, c.on.held, c.on.now)
			checkSays(t, err, c.says, c.err...)
			if row != c.want {
				t.Errorf("row stored %+v; want %+v", row, c.want)
			}
		})
	}
}

// A holder query answers the lease while it is live: up to its last tick,
// not at its expiry tick, never for a released row (even asked at a tick
// before the release, from a clock behind).
func TestHolder(t *testing.T) {
	for _, c := range []struct {
		name  string
		row   LeaseRow
		found bool
		now   int64
		live  bool
	}{
		{"never leased", LeaseRow{}, false, 0, false},
		{"at its grant", live, true, 10, true},
		{"at its last tick t+d-1", live, true, 19, true},
		{"at its expiry tick t+d", live, true, 20, false},
		{"released, asked after the release", released, true, 16, false},
		{"released, asked a tick before the release's expiry", released, true, 14, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			lease, ok := Holder(c.row, c.found, "r", c.now)
			want := leases.Lease{}
			if c.live {
				want = c.row.Lease("r")
			}
			if ok != c.live || lease != want {
				t.Errorf("Holder = %+v, %v; want %+v, %v", lease, ok, want, c.live)
			}
		})
	}
}

// LiveFor is true only for held's own tenure, up to its last tick; a
// tick behind the row's last change is a refusal only for held's own
// tenure (for any other the answer is no).
func TestLiveFor(t *testing.T) {
	for _, c := range []struct {
		name string
		on   on
		live bool
		err  []error
	}{
		{"its own tenure at its last tick t+d-1", on{live, true, held, 19}, true, nil},
		{"its own tenure at its expiry tick t+d", on{live, true, held, 20}, false, nil},
		{"its own tenure at the row's last change", on{live, true, held, 12}, true, nil},
		{"its own tenure, a tick before the row's last change", on{live, true, held, 11}, false, []error{leases.ErrTickBackwards}},
		{"never leased", on{LeaseRow{}, false, held, 13}, false, nil},
		{"released", on{released, true, held, 16}, false, nil},
		{"released, a tick before the release: not live, no refusal", on{released, true, held, 14}, false, nil},
		{"released by a row that keeps its holder's name, a tick before the release: not live, no refusal",
			on{LeaseRow{Epoch: 3, Holder: "a", GrantedAt: 10, ExpiresAt: 15, LastTick: 15}, true, held, 14}, false, nil},
		{"another holder at the same epoch", on{live, true, with("b", 3), 13}, false, nil},
		{"a lower epoch", on{live, true, with("a", 2), 13}, false, nil},
		{"a higher epoch", on{live, true, with("a", 4), 13}, false, nil},
		{"another tenure, a tick before the row's last change: no refusal", on{live, true, with("a", 2), 11}, false, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			ok, err := LiveFor(c.on.row, c.on.found, c.on.held, c.on.now)
			checkKinds(t, err, c.err...)
			if ok != c.live {
				t.Errorf("LiveFor = %v; want %v", ok, c.live)
			}
		})
	}
}

// NotLive gives each reason its own kind beside ErrNotLive: never leased,
// released or another tenure's is ErrNotHolder, an expiry ErrLeaseExpired
// with how long before the check it was.
func TestNotLive(t *testing.T) {
	for _, c := range []struct {
		name string
		on   on
		err  []error
		says string
	}{
		{"never leased", on{LeaseRow{}, false, held, 13}, []error{leases.ErrNotLive, leases.ErrNotHolder}, "never leased"},
		{"released", on{released, true, held, 16}, []error{leases.ErrNotLive, leases.ErrNotHolder}, "epoch 3 of \"r\" was released"},
		{"a later epoch, released", on{LeaseRow{Epoch: 4, LastTick: 15}, true, held, 16}, []error{leases.ErrNotLive, leases.ErrNotHolder}, "epoch 4 was released"},
		{"another holder", on{live, true, with("b", 3), 13}, []error{leases.ErrNotLive, leases.ErrNotHolder}, "at epoch 3"},
		{"a lower epoch", on{live, true, with("a", 2), 13}, []error{leases.ErrNotLive, leases.ErrNotHolder}, "at epoch 3"},
		{"expired at its expiry tick t+d", on{live, true, held, 20}, []error{leases.ErrNotLive, leases.ErrLeaseExpired}, "0 ms before"},
		{"expired 5 ticks before", on{live, true, held, 25}, []error{leases.ErrNotLive, leases.ErrLeaseExpired}, "5 ms before"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := NotLive(c.on.row, c.on.found, c.on.held, c.on.now)
			checkSays(t, err, c.says, c.err...)
		})
	}
}

// NotBefore and Clock: an authority's own clock gives a decision's tick,
// never earlier than the row's last change; a negative reading and an
// expiry that would overflow are invalid input, checked only for a
// decision that sets an expiry (ttl above 0).
func TestClock(t *testing.T) {
	for _, c := range []struct {
		name  string
		row   LeaseRow
		found bool
		clock int64
		ttl   int64
		tick  int64
		err   []error
	}{
		{"no row: the reading", LeaseRow{}, false, 3, 1, 3, nil},
		{"no row: a reading behind a stale row's tick is kept", LeaseRow{LastTick: 9}, false, 3, 1, 3, nil},
		{"a reading after the last change", live, true, 13, 1, 13, nil},
		{"a reading at the last change", live, true, 12, 1, 12, nil},
		{"a reading stepped back before the last change: the last change", live, true, 11, 1, 12, nil},
		{"a reading of 0", LeaseRow{}, false, 0, 1, 0, nil},
		{"a negative reading", LeaseRow{}, false, -1, 1, 0, []error{leases.ErrInvalidInput}},
		{"an expiry at the largest tick", LeaseRow{}, false, math.MaxInt64 - 1, 1, math.MaxInt64 - 1, nil},
		{"an expiry one past the largest tick", LeaseRow{}, false, math.MaxInt64, 1, 0, []error{leases.ErrInvalidInput}},
		{"no expiry (ttl 0) at the largest tick", LeaseRow{}, false, math.MaxInt64, 0, math.MaxInt64, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.err == nil {
				if got := NotBefore(c.row, c.found, c.clock); got != c.tick {
					t.Errorf("NotBefore = %d; want %d", got, c.tick)
				}
			}
			tick, err := Clock(func() int64 { return c.clock })(c.row, c.found, c.ttl)
			checkKinds(t, err, c.err...)
			if tick != c.tick {
				t.Errorf("Clock's tick = %d; want %d", tick, c.tick)
			}
			if tick, err := At(c.clock)(c.row, c.found, c.ttl); tick != c.clock || err != nil {
				t.Errorf("At(%d) = %d, %v; want the caller's tick as it is", c.clock, tick, err)
			}
		})
	}
}

// Granted: the lease on success; the lease beside the error on an unknown
// outcome (it may be live); no lease on a refusal or a failure before
// commit.
func TestGranted(t *testing.T) {
	lease := live.Lease("r")
	failed := errors.New("disk I/O error")
	for _, c := range []struct {
		name string
		err  error
		want leases.Lease
	}{
		{"committed", nil, lease},
		{"an unknown outcome: the lease it would have granted", leases.ErrOutcomeUnknown, lease},
		{"a refusal: no lease", leases.ErrLeaseHeld, leases.Lease{}},
		{"a failure before commit: no lease", failed, leases.Lease{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := Granted(lease, c.err, "r", "a", 10)
			switch {
			case c.err == nil:
				checkKinds(t, err)
			case !errors.Is(err, c.err):
				t.Errorf("%v does not match %v", err, c.err)
			case errors.Is(err, leases.ErrOutcomeUnknown) != errors.Is(c.err, leases.ErrOutcomeUnknown):
				t.Errorf("%v changed whether the outcome is unknown", err)
			case !strings.Contains(err.Error(), `acquire "r" for "a" at tick 10`):
				t.Errorf("%q does not name the acquire", err)
			}
			if got != c.want {
				t.Errorf("lease %+v; want %+v", got, c.want)
			}
		})
	}
}

// A receiver's write: an unfenced one takes everything; a fenced one takes
// a higher epoch or its first write, refuses a lower one (Stale), takes
// the first write of an epoch observed ahead of it, and tells a replay of
// the same value from a conflicting one.
func TestWrite(t *testing.T) {
	stored := leases.Record{Epoch: 5, ValueEpoch: 5, Value: "v"}
	observed := leases.Record{Epoch: 5, ValueEpoch: 4, Value: "old"}
	accepted := func(epoch int64, value string) leases.WriteResult {
		return leases.WriteResult{Outcome: leases.Accepted, Record: leases.Record{Epoch: epoch, ValueEpoch: epoch, Value: value}}
	}
	for _, c := range []struct {
		name   string
		mode   leases.Mode
		stored leases.Record
		found  bool
		epoch  int64
		value  string
		want   leases.WriteResult
	}{
		{"unfenced, a lower epoch: taken", leases.Unfenced, stored, true, 4, "w", accepted(4, "w")},
		{"unfenced, the same epoch, another value: taken", leases.Unfenced, stored, true, 5, "w", accepted(5, "w")},
		{"fenced, the first write", leases.Fenced, leases.Record{}, false, 1, "w", accepted(1, "w")},
		{"fenced, one epoch higher", leases.Fenced, stored, true, 6, "w", accepted(6, "w")},
		{"fenced, one epoch lower: stale", leases.Fenced, stored, true, 4, "w", leases.WriteResult{Outcome: leases.Stale, Record: stored}},
		{"fenced, the same epoch and value: replay", leases.Fenced, stored, true, 5, "v", leases.WriteResult{Outcome: leases.Replay, Record: stored}},
		{"fenced, the same epoch, another value: conflict", leases.Fenced, stored, true, 5, "w", leases.WriteResult{Outcome: leases.Conflict, Record: stored}},
		{"fenced, the first write at an epoch observed ahead", leases.Fenced, observed, true, 5, "w", accepted(5, "w")},
		{"fenced, below an epoch observed ahead: stale", leases.Fenced, observed, true, 4, "old", leases.WriteResult{Outcome: leases.Stale, Record: observed}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Write(c.mode, c.stored, c.found, c.epoch, c.value); got != c.want {
				t.Errorf("Write = %+v; want %+v", got, c.want)
			}
		})
	}
}

// Observe raises the fence (keeping the value), replays at it, and is
// stale below it; Admit is the same but for the fence's own epoch, which
// it admits again (a tenure runs many transactions).
func TestObserveAndAdmit(t *testing.T) {
	stored := leases.Record{Epoch: 5, ValueEpoch: 4, Value: "v"}
	raised := func(epoch int64) leases.WriteResult {
		return leases.WriteResult{Outcome: leases.Accepted, Record: leases.Record{Epoch: epoch, ValueEpoch: 4, Value: "v"}}
	}
	stale := leases.WriteResult{Outcome: leases.Stale, Record: stored}
	for _, c := range []struct {
		name           string
		stored         leases.Record
		found          bool
		epoch          int64
		observe, admit leases.WriteResult
	}{
		{"no record: the fence rises", leases.Record{}, false, 2,
			leases.WriteResult{Outcome: leases.Accepted, Record: leases.Record{Epoch: 2}},
			leases.WriteResult{Outcome: leases.Accepted, Record: leases.Record{Epoch: 2}}},
		{"one epoch above the fence: it rises, the value stays", stored, true, 6, raised(6), raised(6)},
		{"at the fence: a replay, admitted again", stored, true, 5, leases.WriteResult{Outcome: leases.Replay, Record: stored}, raised(5)},
		{"one epoch below the fence: stale", stored, true, 4, stale, stale},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Observe(c.stored, c.found, c.epoch); got != c.observe {
				t.Errorf("Observe = %+v; want %+v", got, c.observe)
			}
			if got := Admit(c.stored, c.found, c.epoch); got != c.admit {
				t.Errorf("Admit = %+v; want %+v", got, c.admit)
			}
		})
	}
}

// A guarded write is NotLive unless held is the authority's live lease at
// now (up to its last tick), refused on a tick behind held's own tenure,
// and otherwise what a fenced receiver does with held's epoch.
func TestGuarded(t *testing.T) {
	stored := leases.Record{Epoch: 3, ValueEpoch: 3, Value: "v"}
	ahead := leases.Record{Epoch: 4, ValueEpoch: 4, Value: "v"}
	for _, c := range []struct {
		name   string
		row    LeaseRow
		held   leases.Lease
		now    int64
		stored leases.Record
		found  bool
		value  string
		want   leases.WriteResult
		err    []error
	}{
		{"live at its last tick t+d-1, the first write", live, held, 19, leases.Record{}, false, "w",
			leases.WriteResult{Outcome: leases.Accepted, Record: leases.Record{Epoch: 3, ValueEpoch: 3, Value: "w"}}, nil},
		{"at its expiry tick t+d: not live", live, held, 20, stored, true, "w",
			leases.WriteResult{Outcome: leases.NotLive, Record: stored}, nil},
		{"released: not live", released, held, 16, stored, true, "w",
			leases.WriteResult{Outcome: leases.NotLive, Record: stored}, nil},
		{"another holder: not live", live, with("b", 3), 13, stored, true, "w",
			leases.WriteResult{Outcome: leases.NotLive, Record: stored}, nil},
		{"a tick before the row's last change: backwards", live, held, 11, stored, true, "w",
			leases.WriteResult{}, []error{leases.ErrTickBackwards}},
		{"live, a replay", live, held, 13, stored, true, "v",
			leases.WriteResult{Outcome: leases.Replay, Record: stored}, nil},
		{"live, a conflict", live, held, 13, stored, true, "w",
			leases.WriteResult{Outcome: leases.Conflict, Record: stored}, nil},
		{"live, the record already at a higher epoch: stale", live, held, 13, ahead, true, "w",
			leases.WriteResult{Outcome: leases.Stale, Record: ahead}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := Guarded(c.row, true, c.held, c.now, c.stored, c.found, c.value)
			checkKinds(t, err, c.err...)
			if got != c.want {
				t.Errorf("Guarded = %+v; want %+v", got, c.want)
			}
		})
	}
}
