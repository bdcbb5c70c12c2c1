package opstest

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"leases/httpfence"
	"leases/ops"
	"leases/testkit/fencetest"
)

// Benchmark measures a new operation through the record next to its
// floor: the same effect row inserted in a bare transaction of its own.
// "Do" calls ops.Do; "Handler" serves an HTTP request through
// httpfence.Handler (no network: ServeHTTP on a recorded response), next
// to a bare handler that begins its own transaction, inserts the row and
// commits. The two alternate in one loop, so that both see the same
// machine; each case reports both times per call and their ratio
// (x-floor).
func Benchmark(b *testing.B, db fencetest.DB) {
	ctx := fencetest.Context(b)
	table := Setup(b, db, "ops_bench")
	insert := db.SQL(`INSERT INTO ops_bench_effects (resource, epoch, key, value) VALUES ($1, $2, $3, $4)`)
	prepared, err := db.PrepareContext(ctx, insert)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = prepared.Close() })
	row := func(ctx context.Context, tx *sql.Tx, key string) (ops.Response, error) {
		_, err := tx.StmtContext(ctx, prepared).ExecContext(ctx, "r", 1, key, "value")
		return ops.Response{Status: 201, Type: "text/plain", Body: []byte("done\n")}, err
	}
	bare := func(ctx context.Context, key string) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if _, err := row(ctx, tx, key); err != nil {
			return fmt.Errorf("%w (%v)", err, tx.Rollback())
		}
		return tx.Commit()
	}
	run := 0
	pair := func(b *testing.B, floor, fenced func(key string) error) {
		run++ // -count runs a case again: keys of its own
		var floorTime, fencedTime time.Duration
		for i := 0; b.Loop(); i++ {
			key := fmt.Sprintf("%s %d %d", b.Name(), run, i)
			floorTime += timed(b, func() error { return floor("bare " + key) })
			fencedTime += timed(b, func() error { return fenced(key) })
		}
		b.ReportMetric(float64(floorTime.Nanoseconds())/float64(b.N), "floor-ns/op")
		b.ReportMetric(float64(fencedTime.Nanoseconds())/float64(b.N), "record-ns/op")
		b.ReportMetric(float64(fencedTime)/float64(floorTime), "x-floor")
	}
	b.Run("Do", func(b *testing.B) {
		pair(b, func(key string) error { return bare(ctx, key) }, func(key string) error {
			call := ops.Call{Resource: "r", Epoch: 1, Key: key, Request: []byte(key)}
			_, err := table.Do(ctx, call, func(ctx context.Context, tx *sql.Tx) (ops.Response, error) { return row(ctx, tx, key) })
			return err
		})
	})
	b.Run("Handler", func(b *testing.B) {
		respond := func(w http.ResponseWriter, resp ops.Response, err error) {
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			w.Header().Set("Content-Type", resp.Type)
			w.WriteHeader(resp.Status)
			_, _ = w.Write(resp.Body)
		}
		floor := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			key := r.Header.Get(httpfence.HeaderKey)
			respond(w, ops.Response{Status: 201, Type: "text/plain", Body: []byte("done\n")}, bare(r.Context(), key))
		})
		fenced := httpfence.Handler(table, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			resp, err := row(r.Context(), httpfence.Tx(r), r.Header.Get(httpfence.HeaderKey))
			respond(w, resp, err)
		}))
		serve := func(h http.Handler) func(key string) error {
			return func(key string) error {
				req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/items", strings.NewReader(key))
				req.Header.Set(httpfence.HeaderResource, "r")
				req.Header.Set(httpfence.HeaderEpoch, strconv.Itoa(1))
				req.Header.Set(httpfence.HeaderKey, key)
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != 201 {
					return fmt.Errorf("answered %d %q", w.Code, w.Body)
				}
				return nil
			}
		}
		pair(b, serve(floor), serve(fenced))
	})
}

func timed(b *testing.B, fn func() error) time.Duration {
	start := time.Now()
	if err := fn(); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}
