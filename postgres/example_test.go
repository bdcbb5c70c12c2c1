package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"leases/postgres"
	"leases/postgres/pgtest"
	"leases/session"
	"leases/testkit/fencetest"
)

// work does one job under its lease, with nothing but PostgreSQL: it
// waits for the job's lease (timed by the server's clock), begins its
// tenure in the same database, and writes the job's rows in transactions
// that commit only while the lease is live on the server's clock (checked
// again by the server when it commits) and its epoch is the newest the
// fence has seen, under a context that ends when the session may have
// lost the lease. A holder paused inside such a transaction commits
// nothing after its lease's expiry, nor after the next holder was
// granted. Every error is returned: none is dropped.
//
// Its imports:
//
//	import (
//		"context"
//		"database/sql"
//		"time"
//
//		"leases/postgres"
//		"leases/session"
//	)
func work(ctx context.Context, store *postgres.Store, job, worker string) error {
	return session.Do(ctx, store.Lessor(), job, worker, session.Options{TTL: 10 * time.Second},
		func(ctx context.Context, s *session.Session) error {
			tenure, err := store.Tenure(ctx, s.Lease())
			if err != nil {
				return err // not live, superseded already, or the database failed
			}
			for _, line := range []string{"hours", "travel"} {
				// ... the work for this line, under ctx ...
				err := tenure.Tx(ctx, nil, func(tx *sql.Tx) error {
					_, err := tx.ExecContext(ctx, `INSERT INTO invoice_lines (job, line, epoch) VALUES ($1, $2, $3)`,
						job, line, s.Epoch())
					return err
				})
				if err != nil {
					return err // leases.ErrNotLive, leases.ErrStale, the session's end, or a failure
				}
			}
			return nil
		})
}

// open opens the leases, on the server's clock, in the service's own
// PostgreSQL database. dsn is either form pgx takes (host=... dbname=...,
// or postgres://...). Each connection bounds a paused holder's open
// transaction, which holds back the next holder's grant, to the
// session's margin (a fifth of the 10 s TTL): the server ends a session
// idle in a transaction for 2 s (or set it for the role, or in the DSN:
// see docs/postgres.md).
//
// Its imports:
//
//	import (
//		"context"
//		"database/sql"
//		"errors"
//
//		"github.com/jackc/pgx/v5"
//		"github.com/jackc/pgx/v5/stdlib"
//
//		"leases/postgres"
//	)
func open(ctx context.Context, dsn string) (*postgres.Store, *sql.DB, error) {
	config, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, nil, err
	}
	config.RuntimeParams["idle_in_transaction_session_timeout"] = "2s"
	db := stdlib.OpenDB(*config)
	store, err := postgres.New(db, postgres.Options{})
	if err == nil {
		err = store.Create(ctx) // once, at setup
	}
	if err != nil {
		return nil, nil, errors.Join(err, db.Close())
	}
	return store, db, nil
}

// The example runs: two workers, each with a database handle of its own
// (as two processes), one opened with a keyword/value DSN and one with a
// URL, do the same job one after the other, at epochs 1 and 2, and every
// row they wrote commits; each handle's sessions have the idle timeout.
func TestExampleWork(t *testing.T) {
	ctx := fencetest.Context(t)
	dsn := pgtest.Shared(t).DSN("postgres")
	job := fmt.Sprintf("invoice-%d", stores.Add(1)) // a job of this run's own
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, dsn := range []string{dsn, asURL(t, dsn, "")} {
		worker := fmt.Sprintf("worker-%d", i+1)
		store, db, err := open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		if got := idleTimeout(t, db); got != "2s" {
			t.Fatalf("%s: idle_in_transaction_session_timeout %q; want 2s", dsn, got)
		}
		if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS invoice_lines (job text, line text, epoch bigint)`); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { errs[i] = work(ctx, store, job, worker) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	db := database(t, 1)
	rows, err := db.QueryContext(ctx, `SELECT line || '@' || epoch FROM invoice_lines WHERE job = $1 ORDER BY epoch, line`, job)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var row string
		if err := rows.Scan(&row); err != nil {
			t.Fatal(err)
		}
		got = append(got, row)
	}
	if want := []string{"hours@1", "travel@1", "hours@2", "travel@2"}; !slices.Equal(got, want) {
		t.Fatalf("rows %q; want %q", got, want)
	}
}

// The DSNs docs/postgres.md gives, in both forms, set the idle timeout
// by themselves, with the driver alone.
func TestDSNsSetTheIdleTimeout(t *testing.T) {
	kv := pgtest.Shared(t).DSN("postgres")
	for _, dsn := range []string{
		kv + " options='-c idle_in_transaction_session_timeout=5s'",
		asURL(t, kv, "options=-c%20idle_in_transaction_session_timeout%3D5s"),
		asURL(t, kv, "idle_in_transaction_session_timeout=5s"),
	} {
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		if got := idleTimeout(t, db); got != "5s" {
			t.Fatalf("%s: idle_in_transaction_session_timeout %q; want 2s", dsn, got)
		}
	}
}

// asURL is the keyword/value DSN kv as a postgres:// URL, with query (if
// any) added to its parameters.
func asURL(t *testing.T, kv, query string) string {
	t.Helper()
	config, err := pgx.ParseConfig(kv)
	if err != nil {
		t.Fatal(err)
	}
	q := url.Values{"host": {config.Host}, "port": {strconv.Itoa(int(config.Port))}, "sslmode": {"disable"}}.Encode()
	if query != "" {
		q += "&" + query
	}
	u := url.URL{Scheme: "postgres", User: url.User(config.User), Path: "/" + config.Database, RawQuery: q}
	return u.String()
}

// idleTimeout is the idle_in_transaction_session_timeout of a session of
// db.
func idleTimeout(t *testing.T, db *sql.DB) string {
	t.Helper()
	var got string
	if err := db.QueryRowContext(fencetest.Context(t), `SHOW idle_in_transaction_session_timeout`).Scan(&got); err != nil {
		t.Fatal(err)
	}
	return got
}
