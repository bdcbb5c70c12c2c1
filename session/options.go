package session

import (
	"fmt"
	"log/slog"
	"time"

	"leases"
	"leases/clock"
)

// DefaultTTL is a session's time-to-live when its options leave it zero:
// client-go's leader election uses the same.
const DefaultTTL = 15 * time.Second

// DefaultCloseTimeout bounds Close's release when its context has already
// ended.
const DefaultCloseTimeout = time.Second

// DefaultDrift is a session's allowance for clock rate when its options
// leave it zero: a millisecond a second, twice the 500 ppm that NTP
// tolerates in a clock's frequency.
const DefaultDrift = 0.001

// Options tune a session. The zero value is a session of DefaultTTL on the
// wall clock that logs nothing.
type Options struct {
	// TTL is the lease's time-to-live at the grant and at every renewal,
	// in whole milliseconds (a clock's tick); zero means DefaultTTL.
	TTL time.Duration
	// Margin is how long before the lease could expire the session ends:
	// the holder's allowance for the time an action takes to land after
	// its last check, and for clocks that disagree. Zero means TTL/5; it
	// must stay below TTL. It is rounded up to a whole millisecond.
	Margin time.Duration
	// Drift is how much faster than the session's own clock the clock
	// that decides expiry (the authority's, or the next holder's) may
	// run, as a fraction: the session ends Drift×TTL earlier, besides the
	// margin (Chubby's conservative lease clock), rounded down to a
	// millisecond. Zero means DefaultDrift; it must be below 0.5.
	Drift float64
	// RenewEvery is the longest the session waits after each grant or
	// confirmed renewal before it renews: it renews on the process's
	// next beat, the beats RenewEvery apart and shared by every session
	// of the process with the same RenewEvery, so that their renewals
	// arrive together and go to the store as one batch (the first
	// renewal after a grant comes sooner). Zero means (TTL-Margin)/3, so
	// that two failed renewals still leave time for a third before the
	// deadline. It must be below TTL-Margin.
	RenewEvery time.Duration
	// Clock is what the session counts its deadline and its renewals on.
	// Nil means the lessor's own clock when the lessor is driven by one
	// (clock.Lessor), and otherwise the wall clock.
	Clock clock.Clock
	// Logger receives what an operator needs to see: grants, renewals
	// that failed and why, the end and why (renewals themselves at debug
	// level). Nil means no logging.
	Logger *slog.Logger
	// OnEvent, when set, is called for every grant, renewal, failed
	// renewal and end, in order, from the session's goroutines; it must
	// return promptly.
	OnEvent func(Event)
	// CloseTimeout bounds Close's release when the context given to Close
	// has already ended (the usual defer after an interrupt), and the
	// release of a lease in doubt (an acquire whose outcome is unknown)
	// by Start, Wait, Do and Lead once their context has ended. Zero
	// means DefaultCloseTimeout.
	CloseTimeout time.Duration
	// Grace bounds how long Do and Lead wait for the work under the
	// lease to return once its context has ended (their context ended,
	// or the session did), counted on the session's clock. Until the work
	// returns they do not release the lease (the session goes on renewing
	// it while it lives), so that the next holder is never granted while
	// the work may still act. Once Grace has passed with the work still
	// running, they return ErrWorkRunning and leave the lease to run out
	// by itself. Zero means no bound: wait for the work however long it
	// takes. It is rounded up to a whole millisecond.
	Grace time.Duration
}

// settings are Options checked and filled in, in the clock's ticks
// (milliseconds).
type settings struct {
	ttl          time.Duration // whole milliseconds
	margin       int64
	drift        int64 // the allowance for clock rate, in ticks
	lifetime     int64 // from a request's sending to the deadline: ttl - margin - drift
	renewEvery   int64
	phase        int64 // of the renewal beats: renewals fall on phase + k*renewEvery
	minBackoff   int64
	maxBackoff   int64
	clock        clock.Clock
	log          *slog.Logger
	onEvent      func(Event)
	closeTimeout time.Duration
	grace        int64 // ticks; 0: no bound
}

// settings checks o and fills in its defaults for a session on lessor.
// Nonsense (a TTL below a tick, a margin at or above the TTL, negative
// durations, a renewal after the deadline) is refused with
// leases.ErrInvalidInput.
func (o Options) settings(lessor leases.Lessor) (settings, error) {
	set, err := o.timing()
	if err != nil {
		return settings{}, err
	}
	switch {
	case o.CloseTimeout == 0:
		set.closeTimeout = DefaultCloseTimeout
	case o.CloseTimeout < 0:
		return settings{}, invalid("CloseTimeout %v is negative", o.CloseTimeout)
	default:
		set.closeTimeout = o.CloseTimeout
	}
	if o.Grace < 0 {
		return settings{}, invalid("Grace %v is negative", o.Grace)
	}
	set.grace = ceilTicks(o.Grace)
	set.clock = o.Clock
	if set.clock == nil {
		set.clock = clock.Wall{}
		if driven, ok := lessor.(interface{ Clock() clock.Clock }); ok {
			set.clock = driven.Clock()
		}
	}
	if _, wall := set.clock.(clock.Wall); wall {
		set.phase = int64(beatSeed % uint64(set.renewEvery))
	}
	set.log = o.Logger
	if set.log == nil {
		set.log = slog.New(slog.DiscardHandler)
	}
	set.onEvent = o.OnEvent
	return set, nil
}

// invalid is the refusal of a session's options.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: session options: "+format, append([]any{leases.ErrInvalidInput}, args...)...)
}

// timing checks the options that time a session (TTL, Margin, Drift,
// RenewEvery) and fills in their defaults, in ticks: the lifetime from a
// request's sending to the deadline, the renewal period and the backoff.
func (o Options) timing() (settings, error) {
	ttl := o.TTL
	switch {
	case ttl == 0:
		ttl = DefaultTTL
	case ttl < 0:
		return settings{}, invalid("TTL %v is negative", ttl)
	case ttl < time.Millisecond:
		return settings{}, invalid("TTL %v is below a millisecond (did you mean %d * time.Second?)", ttl, int64(ttl))
	}
	ttl = ttl.Truncate(time.Millisecond)
	margin, err := o.margin(ttl)
	if err != nil {
		return settings{}, err
	}
	drift := o.Drift
	switch {
	case drift == 0:
		drift = DefaultDrift
	case drift < 0 || drift >= 0.5:
		return settings{}, invalid("Drift %v is not in [0, 0.5)", drift)
	}
	driftTicks := int64(float64(ttl.Milliseconds()) * drift)
	window := ttl.Milliseconds() - margin - driftTicks // from a grant to its deadline
	if window < 1 {
		return settings{}, invalid("Margin %v and the drift allowance %v leave nothing of TTL %v", ticksDuration(margin), ticksDuration(driftTicks), ttl)
	}
	renewEvery := o.RenewEvery.Milliseconds()
	switch {
	case o.RenewEvery == 0:
		renewEvery = max(1, window/3)
	case o.RenewEvery < time.Millisecond:
		return settings{}, invalid("RenewEvery %v is below a millisecond", o.RenewEvery)
	case renewEvery >= window:
		return settings{}, invalid("RenewEvery %v is not below the TTL less the margin and the drift allowance (%v): the session would end before it renewed",
			o.RenewEvery, ticksDuration(window))
	}
	// Retries after a failure back off from a hundredth of the TTL to a
	// tenth, so that a store that is down is not hammered and one that
	// comes back is found well before the deadline.
	minBackoff := max(1, ttl.Milliseconds()/100)
	return settings{
		ttl: ttl, margin: margin, drift: driftTicks, lifetime: window, renewEvery: renewEvery,
		minBackoff: minBackoff, maxBackoff: max(minBackoff, ttl.Milliseconds()/10),
	}, nil
}

// margin is o's margin for a session of ttl, in ticks, rounded up.
func (o Options) margin(ttl time.Duration) (int64, error) {
	margin := o.Margin
	switch {
	case margin == 0:
		margin = ttl / 5
	case margin < 0:
		return 0, invalid("Margin %v is negative", margin)
	case margin >= ttl:
		return 0, invalid("Margin %v is not below TTL %v: the session would end before it began", margin, ttl)
	}
	ticks := ceilTicks(margin)
	if ticks >= ttl.Milliseconds() {
		return 0, invalid("Margin %v rounds up to the TTL %v", margin, ttl)
	}
	return ticks, nil
}

// ceilTicks is d in milliseconds, rounded up.
func ceilTicks(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// ticksDuration is a number of ticks as a duration.
func ticksDuration(ticks int64) time.Duration { return time.Duration(ticks) * time.Millisecond }
