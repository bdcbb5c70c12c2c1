package metrics_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"leases"
	"leases/fence"
	"leases/metrics"
	"leases/session"
	"leases/sqlite"
	"leases/testkit/sessiontest"
)

// The sessions' time-to-live, in the manual clock's ticks: a session
// lives 799 ticks after each grant or renewal (the TTL less its default
// margin of a fifth and a drift allowance of a tick) and renews every 266.
const ttl = 1000 * time.Millisecond

// bench is the test's setting: a SQLite store on a manual clock, and the
// metrics under test, read through an in-memory reader.
type bench struct {
	*sessiontest.Bench
	t      *testing.T
	m      *metrics.Metrics
	reader *sdkmetric.ManualReader
	opts   session.Options
}

func newBench(t *testing.T) *bench {
	b := &bench{Bench: sessiontest.New(t), t: t, reader: sdkmetric.NewManualReader()}
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(b.reader))
	t.Cleanup(func() { _ = provider.Shutdown(context.Background()) })
	m, err := metrics.New(provider, metrics.Options{Clock: b.Clock})
	if err != nil {
		t.Fatal(err)
	}
	b.m = m
	b.opts = session.Options{TTL: ttl, Clock: b.Clock, OnEvent: m.OnEvent}
	return b
}

// wait is metrics.Wait on lessor (the store's own when nil), which must
// be granted; the session is closed when the test ends.
func (b *bench) wait(ctx context.Context, lessor leases.Lessor, resource, holder string) (*session.Session, error) {
	if lessor == nil {
		lessor = b.Store.Lessor()
	}
	s, err := b.m.Wait(ctx, lessor, resource, holder, b.opts)
	if s != nil {
		b.t.Cleanup(func() { _ = s.Close(context.Background()) })
	}
	return s, err
}

func (b *bench) granted(lessor leases.Lessor, resource, holder string) *session.Session {
	b.t.Helper()
	s, err := b.wait(b.Ctx, lessor, resource, holder)
	if err != nil {
		b.t.Fatal(err)
	}
	return s
}

// read is every data point the reader has, one line each, sorted:
// "name [unit] {attributes} value", a histogram's value its count, sum,
// least and greatest.
func (b *bench) read() []string {
	b.t.Helper()
	var rm metricdata.ResourceMetrics
	if err := b.reader.Collect(b.Ctx, &rm); err != nil {
		b.t.Fatal(err)
	}
	var lines []string
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != "leases/metrics" {
			b.t.Errorf("instruments in scope %q", sm.Scope.Name)
		}
		for _, m := range sm.Metrics {
			at := func(set attribute.Set, value string) {
				var attrs []string
				for _, kv := range set.ToSlice() {
					attrs = append(attrs, string(kv.Key)+"="+kv.Value.Emit())
				}
				lines = append(lines, fmt.Sprintf("%s [%s] {%s} %s", m.Name, m.Unit, strings.Join(attrs, ","), value))
			}
			switch data := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range data.DataPoints {
					at(p.Attributes, strconv.FormatInt(p.Value, 10))
				}
			case metricdata.Histogram[float64]:
				for _, p := range data.DataPoints {
					least, _ := p.Min.Value()
					most, _ := p.Max.Value()
					at(p.Attributes, fmt.Sprintf("count=%d sum=%s min=%s max=%s", p.Count, num(p.Sum), num(least), num(most)))
				}
			default:
				b.t.Errorf("%s: data of type %T", m.Name, m.Data)
			}
		}
	}
	slices.Sort(lines)
	return lines
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// Every instrument, read through an in-memory reader after real sessions
// on SQLite: waits granted, cancelled and failed; renewals slow, failing
// and unknown; sessions closed, lost, cut off by a store that must be
// opened again, and past their deadline; and the fence's and the guard's
// refusals.
func TestEveryInstrumentAfterRealSessions(t *testing.T) {
	b := newBench(t)
	b.waits()    // ticks 0 to 150, on "w"
	b.renewals() // 150 to 712, on "r"
	b.ends()     // 712 to 2244, on "l", "u", "d" and "c"
	var want []string
	for _, r := range []string{"d", "l", "r", "u", "w"} {
		want = append(want,
			"leases.held [{lease}] {leases.resource="+r+"} 0",
			"leases.wait.active [{wait}] {leases.resource="+r+"} 0")
		if r != "w" {
			want = append(want, "leases.wait.duration [s] {leases.resource="+r+",leases.wait.outcome=granted} count=1 sum=0 min=0 max=0")
		}
	}
	want = append(want,
		"leases.fence.refusals [{refusal}] {leases.refusal.kind=not_live,leases.resource=d} 1",
		"leases.fence.refusals [{refusal}] {leases.refusal.kind=superseded,leases.resource=w} 1",
		"leases.renewal.failures [{failure}] {error.type=outcome_unknown,leases.resource=r} 1",
		"leases.renewal.failures [{failure}] {error.type=refused,leases.resource=l} 1",
		"leases.renewal.failures [{failure}] {error.type=store_unusable,leases.resource=u} 1",
		"leases.renewal.failures [{failure}] {error.type=transient,leases.resource=r} 1",
		"leases.renewal.remaining [s] {leases.resource=r} count=2 sum=1.498 min=0.699 max=0.799",
		"leases.held [{lease}] {leases.resource=c} 0",
		"leases.session.ends [{session}] {leases.end.reason=cancelled,leases.resource=c} 1",
		"leases.session.ends [{session}] {leases.end.reason=released,leases.resource=r} 1",
		"leases.session.ends [{session}] {leases.end.reason=released,leases.resource=w} 2",
		"leases.session.ends [{session}] {leases.end.reason=deadline,leases.resource=d} 1",
		"leases.session.ends [{session}] {leases.end.reason=lost,leases.resource=l} 1",
		"leases.session.ends [{session}] {leases.end.reason=store_unusable,leases.resource=u} 1",
		"leases.wait.duration [s] {leases.resource=w,leases.wait.outcome=cancelled} count=1 sum=0.05 min=0.05 max=0.05",
		"leases.wait.duration [s] {leases.resource=w,leases.wait.outcome=failed} count=1 sum=0 min=0 max=0",
		"leases.wait.duration [s] {leases.resource=w,leases.wait.outcome=granted} count=2 sum=0.1 min=0 max=0.1",
	)
	slices.Sort(want)
	if got := b.read(); !slices.Equal(got, want) {
		t.Errorf("read:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// waits: A is granted at once at tick 0; B waits from 0 and is granted
// at 100, when A closes; C waits from 100 until its context ends at 150;
// D's options are invalid. A's tenure in a fence table, once B's has
// begun there, is superseded.
func (b *bench) waits() {
	t := b.t
	a := b.granted(nil, "w", "A")
	got := make(chan *session.Session, 1)
	go func() {
		s, err := b.wait(b.Ctx, nil, "w", "B")
		if err != nil {
			t.Error(err)
		}
		got <- s
	}()
	b.Move(0, nil, 3) // A's two goroutines and B's wait
	b.Move(100, nil, 3)
	if read := strings.Join(b.read(), "\n"); !strings.Contains(read, "leases.held [{lease}] {leases.resource=w} 1") ||
		!strings.Contains(read, "leases.wait.active [{wait}] {leases.resource=w} 1") {
		t.Errorf("while A holds and B waits:\n%s", read)
	}
	_, fences := b.fenceTable()
	tenureA, err := fences.Tenure(b.Ctx, a.Lease())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Close(b.Ctx); err != nil {
		t.Fatal(err)
	}
	bs := <-got
	if bs == nil {
		t.Fatal("B was not granted")
	}
	if _, err := fences.Tenure(b.Ctx, bs.Lease()); err != nil {
		t.Fatal(err)
	}
	err = tenureA.Tx(b.Ctx, nil, func(*sql.Tx) error { return nil })
	if !b.m.CountRefusal(b.Ctx, "w", err) {
		t.Errorf("A's transaction after B's tenure began: %v, not counted as a refusal", err)
	}

	ctx, cancel := context.WithCancel(b.Ctx)
	cancelled := make(chan error, 1)
	go func() { _, err := b.wait(ctx, nil, "w", "C"); cancelled <- err }()
	b.Move(100, nil, 3) // B's two goroutines and C's wait
	b.Move(150, nil, 3)
	cancel()
	if err := <-cancelled; !errors.Is(err, context.Canceled) {
		t.Errorf("C's wait: %v; want context.Canceled", err)
	}
	if _, err := b.m.Wait(b.Ctx, b.Store.Lessor(), "w", "D", session.Options{TTL: -ttl, Clock: b.Clock}); !errors.Is(err, leases.ErrInvalidInput) {
		t.Errorf("D's wait: %v; want ErrInvalidInput", err)
	}
	if err := bs.Close(b.Ctx); err != nil {
		t.Fatal(err)
	}
}

// fenceTable is a service's own SQLite database with a fence table.
func (b *bench) fenceTable() (*sql.DB, *fence.Table) {
	db, err := sql.Open("sqlite", filepath.Join(b.t.TempDir(), "app.db")+"?_txlock=immediate&_pragma=busy_timeout(10000)")
	if err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(func() { _ = db.Close() })
	db.SetMaxOpenConns(1)
	fences, err := fence.New(db, fence.Options{Dialect: fence.SQLite})
	if err == nil {
		err = fences.Create(b.Ctx)
	}
	if err != nil {
		b.t.Fatal(err)
	}
	return db, fences
}

// renewals: R is granted at 150 (deadline 949); its first renewal, sent
// at 416, takes 100 ticks (699 left when it is confirmed at 516); the
// second, at 682, fails before commit; the third, after a backoff of at
// most 10 ticks, has an unknown outcome; the fourth, at most 20 ticks
// later, goes through at once (799 left). Then R closes.
func (b *bench) renewals() {
	s := b.granted(&sessiontest.Renewals{Lessor: b.Store.Lessor(), Clock: b.Clock, Script: []sessiontest.Renewal{
		{Delay: 100},
		{Err: errors.New("connection refused")},
		{Err: fmt.Errorf("renew: %w", leases.ErrOutcomeUnknown)},
	}}, "r", "R")
	for _, tick := range []int64{416, 682, 692, 712} {
		if b.Move(tick, s.Done(), 2) {
			b.t.Fatalf("R ended at tick %d: %v", tick, s.Err())
		}
	}
	if err := s.Close(b.Ctx); err != nil {
		b.t.Fatal(err)
	}
}

// ends: L is granted at 712 and lost at its first renewal (978), its
// lease freed by an operator; U is granted at 978 and ends at its first
// renewal (1244), the store unusable; D is granted at 1244 and its
// process sees the clock again only at 2244, past its deadline (2043)
// and its lease's expiry, when its guarded transaction is refused; C is
// granted at 2244 by session.Do, whose context ends (a shutdown) while
// its work runs.
func (b *bench) ends() {
	t := b.t
	l := b.granted(nil, "l", "L")
	tenureL, err := b.Store.Tenure(l.Context(), l.Lease())
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Store.Authority().Release(b.Ctx, l.Lease(), 712); err != nil {
		t.Fatal(err)
	}
	if !b.Move(978, l.Done(), 2) {
		t.Fatal("L lives on after its lease was freed")
	}
	err = tenureL.Tx(l.Context(), nil, func(*sql.Tx) error { return nil })
	if err == nil || b.m.CountRefusal(b.Ctx, "l", err) {
		t.Errorf("a transaction cut off by the session's end (%v) counted as a refusal", err)
	}

	u := b.granted(&sessiontest.Renewals{Lessor: b.Store.Lessor(), Clock: b.Clock, Script: []sessiontest.Renewal{
		{Err: fmt.Errorf("renew: %w", sqlite.ErrReopenRequired)},
	}}, "u", "U")
	if !b.Move(1244, u.Done(), 2) {
		t.Fatal("U lives on after a renewal that can never succeed")
	}

	d := b.granted(nil, "d", "D")
	tenureD, err := b.Store.Tenure(b.Ctx, d.Lease())
	if err == nil {
		err = tenureD.Tx(b.Ctx, nil, func(*sql.Tx) error { return nil })
	}
	if err != nil || b.m.CountRefusal(b.Ctx, "d", err) {
		t.Fatalf("D's transaction while live: %v", err)
	}
	if !b.Move(2244, d.Done(), 2) {
		t.Fatal("D lives on past its deadline")
	}
	err = tenureD.Tx(b.Ctx, nil, func(*sql.Tx) error { return nil })
	if !b.m.CountRefusal(b.Ctx, "d", err) {
		t.Errorf("D's transaction past its lease's expiry: %v, not counted as a refusal", err)
	}

	ctx, shutdown := context.WithCancel(b.Ctx)
	err = session.Do(ctx, b.Store.Lessor(), "c", "C", b.opts, func(ctx context.Context, _ *session.Session) error {
		shutdown()
		<-ctx.Done()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// CountRefusal counts the fence's and the guard's refusals, and nothing
// else: not the session's end, whatever its cause, nor a failure.
func TestCountRefusalCountsOnlyRefusals(t *testing.T) {
	ended := fmt.Errorf("%w: its renewal was refused: %w", session.ErrLost, leases.ErrNotHolder)
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, ""},
		{"superseded", fmt.Errorf("fence: transaction of epoch 1 on %q: %w", "r", leases.ErrStale), "superseded"},
		{"not live", fmt.Errorf("%w: %w", leases.ErrNotLive, leases.ErrLeaseExpired), "not_live"},
		{"not live, superseded", fmt.Errorf("%w: %w", leases.ErrNotLive, leases.ErrNotHolder), "not_live"},
		{"the session's end", fmt.Errorf("%w: %w", context.Canceled, ended), ""},
		{"a failure", errors.New("disk I/O error"), ""},
		{"an unknown outcome", leases.ErrOutcomeUnknown, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBench(t)
			if counted := b.m.CountRefusal(b.Ctx, "r", tc.err); counted != (tc.want != "") {
				t.Fatalf("CountRefusal(%v) = %v", tc.err, counted)
			}
			var want []string
			if tc.want != "" {
				want = []string{"leases.fence.refusals [{refusal}] {leases.refusal.kind=" + tc.want + ",leases.resource=r} 1"}
			}
			if got := b.read(); !slices.Equal(got, want) {
				t.Fatalf("read %q; want %q", got, want)
			}
		})
	}
}

// The zero options and a nil provider work: the instruments are
// OpenTelemetry's global provider's (a no-op until one is set).
func TestZeroOptionsWork(t *testing.T) {
	m, err := metrics.New(nil, metrics.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m.OnEvent(session.Event{Kind: session.Granted, Resource: "r", Holder: "A", Epoch: 1, Deadline: time.Now().Add(time.Minute)})
	m.OnEvent(session.Event{Kind: session.Ended, Resource: "r", Holder: "A", Epoch: 1, Err: session.ErrEnded})
}
