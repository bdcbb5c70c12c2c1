package metrics_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"leases"
	"leases/fence"
	"leases/health"
	"leases/metrics"
	"leases/session"
	"leases/sqlite"
)

// observe wires a service's lease sessions to Prometheus and to a
// Kubernetes probe: it returns the metrics (for their Wait and
// CountRefusal), the options to start every session with (their events
// feed the metrics and the health check), and the handler to serve:
// /metrics for Prometheus's scrape, /healthz for the probe.
//
// Its imports:
//
//	import (
//		"net/http"
//		"time"
//
//		"github.com/prometheus/client_golang/prometheus"
//		"github.com/prometheus/client_golang/prometheus/promhttp"
//		otelprom "go.opentelemetry.io/otel/exporters/prometheus"
//		sdkmetric "go.opentelemetry.io/otel/sdk/metric"
//
//		"leases/health"
//		"leases/metrics"
//		"leases/session"
//	)
func observe() (*metrics.Metrics, session.Options, http.Handler, error) {
	registry := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(registry))
	if err != nil {
		return nil, session.Options{}, nil, err
	}
	m, err := metrics.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter)), metrics.Options{})
	if err != nil {
		return nil, session.Options{}, nil, err
	}
	checker := health.New(health.Options{})
	opts := session.Options{TTL: 15 * time.Second, OnEvent: func(ev session.Event) {
		m.OnEvent(ev)
		checker.OnEvent(ev)
	}}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
	mux.Handle("GET /healthz", checker)
	return m, opts, mux, nil
}

// A worker waits for its lease, holds it and closes it; Prometheus's
// scrape then shows the wait, the lease no longer held and the session's
// end (durations vary from run to run: only counts are printed here).
func Example_prometheus() {
	ctx := context.Background()
	dir, remove := scratch()
	defer remove()
	store, err := sqlite.Open(ctx, filepath.Join(dir, "leases.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()
	m, opts, handler, err := observe()
	if err != nil {
		fmt.Println(err)
		return
	}
	s, err := m.Wait(ctx, store.Lessor(), "invoices", "worker-1", opts)
	if err != nil {
		fmt.Println(err)
		return
	}
	code, _ := get(handler, "/healthz")
	fmt.Println("/healthz", code)
	if err := s.Close(ctx); err != nil {
		fmt.Println(err)
	}
	code, scraped := get(handler, "/metrics", "leases_held", "leases_session_ends", "leases_wait_duration_seconds_count")
	fmt.Print("/metrics ", code, "\n", scraped)
	// Output:
	// /healthz 200
	// /metrics 200
	// leases_held{leases_resource="invoices",otel_scope_name="leases/metrics",otel_scope_schema_url="",otel_scope_version=""} 0
	// leases_session_ends_total{leases_end_reason="released",leases_resource="invoices",otel_scope_name="leases/metrics",otel_scope_schema_url="",otel_scope_version=""} 1
	// leases_wait_duration_seconds_count{leases_resource="invoices",leases_wait_outcome="granted",otel_scope_name="leases/metrics",otel_scope_schema_url="",otel_scope_version=""} 1
}

// get is the handler's answer to a GET of path: its status, and the lines
// of its body that begin with one of prefixes.
func get(handler http.Handler, path string, prefixes ...string) (int, string) {
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	var shown strings.Builder
	for line := range strings.Lines(rec.Body.String()) {
		if slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(line, p) }) {
			shown.WriteString(line)
		}
	}
	return rec.Code, shown.String()
}

// write writes one line of a job in a transaction of its tenure, and
// counts the transaction when the fence refuses it (a newer holder has
// begun) or a store's guard does (the lease is no longer live).
//
// Its imports:
//
//	import (
//		"context"
//		"database/sql"
//
//		"leases/fence"
//		"leases/metrics"
//	)
func write(ctx context.Context, m *metrics.Metrics, tenure *fence.Tenure, job, line string) error {
	err := tenure.Tx(ctx, nil, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO invoice_lines (job, line, epoch) VALUES (?, ?, ?)`,
			job, line, tenure.Epoch())
		return err
	})
	m.CountRefusal(ctx, tenure.Lease().Resource, err)
	return err
}

// A worker paused while a newer one began its tenure is refused by the
// fence when it writes, and the refusal is counted; here the metrics are
// read through an in-memory reader.
func Example_countRefusal() {
	ctx := context.Background()
	dir, remove := scratch()
	defer remove()
	db, err := sql.Open("sqlite", filepath.Join(dir, "app.db")+"?_txlock=immediate&_pragma=busy_timeout(10000)")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	fences, err := fence.New(db, fence.Options{Dialect: fence.SQLite})
	if err == nil {
		err = fences.Create(ctx)
	}
	if err == nil {
		_, err = db.ExecContext(ctx, `CREATE TABLE invoice_lines (job TEXT, line TEXT, epoch INTEGER)`)
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	reader := sdkmetric.NewManualReader()
	m, err := metrics.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)), metrics.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	var tenures []*fence.Tenure
	for epoch := range int64(2) {
		tenure, err := fences.Tenure(ctx, leases.Lease{Resource: "invoices", Holder: fmt.Sprint("worker-", epoch+1),
			Epoch: epoch + 1, ExpiresAt: 1})
		if err != nil {
			fmt.Println(err)
			return
		}
		tenures = append(tenures, tenure)
	}
	fmt.Println("worker-2:", write(ctx, m, tenures[1], "job-7", "hours"))
	fmt.Println("worker-1 superseded:", errors.Is(write(ctx, m, tenures[0], "job-7", "travel"), leases.ErrStale))
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		fmt.Println(err)
		return
	}
	for _, p := range rm.ScopeMetrics[0].Metrics[0].Data.(metricdata.Sum[int64]).DataPoints {
		kind, _ := p.Attributes.Value("leases.refusal.kind")
		fmt.Println(rm.ScopeMetrics[0].Metrics[0].Name, kind.Emit(), p.Value)
	}
	// Output:
	// worker-2: <nil>
	// worker-1 superseded: true
	// leases.fence.refusals superseded 1
}

// scratch is a directory of an example's own, and what removes it.
func scratch() (string, func()) {
	dir, err := os.MkdirTemp("", "leases-metrics-")
	if err != nil {
		panic(err)
	}
	return dir, func() { _ = os.RemoveAll(dir) }
}
