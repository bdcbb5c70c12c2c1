// Package metrics measures a process's lease holders with OpenTelemetry's
// metric API, from the events of their sessions (session.Options.OnEvent):
// the leases held, the waits for a lease, the renewals and their
// failures, why sessions ended, and the refusals of the fence.
//
// The instruments, in the meter named "leases/metrics":
//
//   - leases.held ({lease}, up-down counter): sessions that hold a lease,
//     by leases.resource.
//   - leases.wait.active ({wait}, up-down counter): waits under way in
//     [Metrics.Wait], by leases.resource.
//   - leases.wait.duration (s, histogram): from a call of [Metrics.Wait]
//     to its return, by leases.resource and leases.wait.outcome (granted,
//     cancelled: its context ended, failed: invalid input or a store that
//     must be opened again).
//   - leases.renewal.remaining (s, histogram): how long a session had to
//     live right after a renewal was confirmed, by leases.resource: its
//     lifetime (the TTL less the margin and the drift allowance) less the
//     renewal's latency. It falls as renewals get slower; 0 means the
//     renewal came back after the deadline. Its count is the renewals.
//   - leases.renewal.failures ({failure}, counter): renewals that failed,
//     by leases.resource and error.type: transient (failed before commit,
//     the session tries again: session.ErrTransient), outcome_unknown (the
//     same, but the renewal may have taken effect), refused (the lease was
//     lost, definitely: the session ended with session.ErrLost),
//     store_unusable (the store must be opened again: the session ended).
//   - leases.session.ends ({session}, counter): sessions that ended, by
//     leases.resource and leases.end.reason, session.EndReason's name of
//     the end: released (closed by its caller: session.ErrClosed),
//     cancelled (closed once the caller's context had ended: a shutdown),
//     lost (session.ErrLost), deadline (session.ErrDeadline: no renewal
//     came in time), store_unusable.
//   - leases.fence.refusals ({refusal}, counter): transactions the fence
//     or a store's guard refused, counted by [Metrics.CountRefusal], by
//     leases.resource and leases.refusal.kind: superseded (a newer epoch
//     reached the fence) or not_live (the lease was not live on the
//     store's clock).
//
// Holders are not an attribute: a process's holder name is usually its
// instance, which the exporter's resource already names.
package metrics

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"leases"
	"leases/clock"
	"leases/session"
)

// scope is the instrumentation scope's name: this package's import path.
const scope = "leases/metrics"

// The attributes' keys.
const (
	resourceKey = attribute.Key("leases.resource")
	outcomeKey  = attribute.Key("leases.wait.outcome")
	errorKey    = attribute.Key("error.type")
	reasonKey   = attribute.Key("leases.end.reason")
	refusalKey  = attribute.Key("leases.refusal.kind")
)

// Options tune the metrics; the zero value measures on the wall clock.
type Options struct {
	// Clock is the clock the sessions count their deadlines on: their
	// Options.Clock, or the lessor's own where it is driven by one
	// (clock.Lessor). The metrics read it to time waits and to tell how
	// long a session has left after a renewal. Nil means the wall
	// clock, which is what a session uses unless told otherwise.
	Clock clock.Clock
}

// Metrics records what a process's sessions report. Its methods are safe
// for concurrent use, from every session of the process at once.
type Metrics struct {
	clock     clock.Clock
	held      metric.Int64UpDownCounter
	waiting   metric.Int64UpDownCounter
	waits     metric.Float64Histogram
	remaining metric.Float64Histogram
	failures  metric.Int64Counter
	ends      metric.Int64Counter
	refusals  metric.Int64Counter
}

// New creates the instruments in provider's meter "leases/metrics"; a nil
// provider means OpenTelemetry's global one. The error is the provider's,
// when it could not create an instrument.
func New(provider metric.MeterProvider, opts Options) (*Metrics, error) {
	if provider == nil {
		provider = otel.GetMeterProvider()
	}
	m := &Metrics{clock: opts.Clock}
	if m.clock == nil {
		m.clock = clock.Wall{}
	}
	meter := provider.Meter(scope)
	var errs [7]error
	m.held, errs[0] = meter.Int64UpDownCounter("leases.held", metric.WithUnit("{lease}"),
		metric.WithDescription("Sessions of this process that hold a lease."))
	m.waiting, errs[1] = meter.Int64UpDownCounter("leases.wait.active", metric.WithUnit("{wait}"),
		metric.WithDescription("Waits for a lease under way."))
	m.waits, errs[2] = meter.Float64Histogram("leases.wait.duration", metric.WithUnit("s"),
		metric.WithDescription("How long a wait for a lease took, from its call to its grant or its giving up."),
		metric.WithExplicitBucketBoundaries(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300))
	m.remaining, errs[3] = meter.Float64Histogram("leases.renewal.remaining", metric.WithUnit("s"),
		metric.WithDescription("How long a session had to live right after a renewal was confirmed."),
		metric.WithExplicitBucketBoundaries(0.1, 0.25, 0.5, 1, 2.5, 5, 7.5, 10, 12.5, 15, 30, 60))
	m.failures, errs[4] = meter.Int64Counter("leases.renewal.failures", metric.WithUnit("{failure}"),
		metric.WithDescription("Renewals that failed, by kind."))
	m.ends, errs[5] = meter.Int64Counter("leases.session.ends", metric.WithUnit("{session}"),
		metric.WithDescription("Sessions that ended, by reason."))
	m.refusals, errs[6] = meter.Int64Counter("leases.fence.refusals", metric.WithUnit("{refusal}"),
		metric.WithDescription("Transactions refused by the fence or a store's guard, by kind."))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, err
	}
	return m, nil
}

// OnEvent records ev. Set it as session.Options.OnEvent (or call it from
// the hook there): it returns promptly, as a hook must.
func (m *Metrics) OnEvent(ev session.Event) {
	ctx := context.Background() // a hook has no context of its own
	resource := resourceKey.String(ev.Resource)
	switch ev.Kind {
	case session.Granted:
		m.held.Add(ctx, 1, metric.WithAttributes(resource))
	case session.Renewed:
		left := max(0, ev.Deadline.UnixMilli()-m.clock.Now())
		m.remaining.Record(ctx, seconds(left), metric.WithAttributes(resource))
	case session.RenewalFailed:
		kind := "transient"
		if errors.Is(ev.Err, leases.ErrOutcomeUnknown) {
			kind = "outcome_unknown"
		}
		m.failures.Add(ctx, 1, metric.WithAttributes(resource, errorKey.String(kind)))
	case session.Ended:
		m.held.Add(ctx, -1, metric.WithAttributes(resource))
		reason := session.EndReason(ev.Err)
		m.ends.Add(ctx, 1, metric.WithAttributes(resource, reasonKey.String(reason)))
		if failure := failureOfEnd[reason]; failure != "" {
			// Only a renewal ends a session with either.
			m.failures.Add(ctx, 1, metric.WithAttributes(resource, errorKey.String(failure)))
		}
	}
}

// failureOfEnd is the renewal failure's kind that ended a session for a
// reason: a definite loss, or a store that can renew no more.
var failureOfEnd = map[string]string{"lost": "refused", "store_unusable": "store_unusable"}

// Wait is session.Wait, timed: leases.wait.active counts it while it
// waits, and leases.wait.duration records how long it took and how it
// ended. Set opts.OnEvent to [Metrics.OnEvent] as well, for the session's
// own events. The waits inside session.Do and session.Lead are not
// measured: the session reports no event when a wait begins.
func (m *Metrics) Wait(ctx context.Context, lessor leases.Lessor, resource, holder string, opts session.Options) (*session.Session, error) {
	attrs := metric.WithAttributes(resourceKey.String(resource))
	m.waiting.Add(ctx, 1, attrs)
	began := m.clock.Now()
	s, err := session.Wait(ctx, lessor, resource, holder, opts)
	took := m.clock.Now() - began
	m.waiting.Add(ctx, -1, attrs)
	outcome := "granted"
	switch {
	case err != nil && ctx.Err() != nil:
		outcome = "cancelled"
	case err != nil:
		outcome = "failed"
	}
	m.waits.Record(ctx, seconds(took), metric.WithAttributes(resourceKey.String(resource), outcomeKey.String(outcome)))
	return s, err
}

// CountRefusal counts err in leases.fence.refusals if it is a refusal of
// the fence or of a store's guard, and reports whether it was: an error
// of fence.Tenure.Tx (or of beginning a tenure) that matches
// leases.ErrStale (kind superseded) or leases.ErrNotLive (kind
// not_live). Any other error (nil, a failure, the session's end, fn's own
// error) is not counted.
func (m *Metrics) CountRefusal(ctx context.Context, resource string, err error) bool {
	var kind string
	switch {
	case errors.Is(err, leases.ErrNotLive):
		kind = "not_live"
	case errors.Is(err, leases.ErrStale):
		kind = "superseded"
	default:
		return false
	}
	m.refusals.Add(ctx, 1, metric.WithAttributes(resourceKey.String(resource), refusalKey.String(kind)))
	return true
}

// seconds is a number of the clock's ticks (milliseconds) in seconds.
func seconds(ticks int64) float64 { return float64(ticks) / 1000 }
