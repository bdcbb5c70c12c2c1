package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"

	"leases"
	"leases/postgres"
	"leases/testkit/fencetest"
)

// A decision's error says which of three things happened, whatever
// happens to its connection: a refusal; a failure before COMMIT was sent
// (the connection lost before it, or the context ended), when nothing
// changed; or an unknown outcome, when the connection was lost with the
// COMMIT: the acquire then returns the lease it would have granted, and
// the store goes on, deciding the next call on what the server holds.
func TestErrorKinds(t *testing.T) {
	cases := []struct {
		name    string
		at      string // the step before which the fault comes
		fault   string // "terminate" the decision's backend, or "cancel" its context
		unknown bool
	}{
		{"the connection lost before the write", "write", "terminate", false},
		{"the connection lost with the commit", "commit", "terminate", true},
		{"the context ended before the commit", "commit", "cancel", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := fencetest.Context(t)
			monitor := database(t, 0).DB
			store := newStore(t, monitor, postgres.Options{})
			before := dump(t, monitor, store)
			db := database(t, 1).DB
			callCtx := faultAt(t, ctx, monitor, db, c.at, c.fault)
			lease, err := sameStore(t, store, db, postgres.Options{}).Authority().Acquire(callCtx, "r", "A", 10, 5)
			switch {
			case err == nil:
				t.Fatal("the acquire succeeded")
			case leases.IsRefusal(err):
				t.Fatalf("%v: a failure reported as a refusal", err)
			case errors.Is(err, leases.ErrOutcomeUnknown) != c.unknown:
				t.Fatalf("%v: unknown outcome %v, want %v", err, !c.unknown, c.unknown)
			case c.fault == "cancel" && !errors.Is(err, context.Canceled):
				t.Fatalf("%v does not match the context's error", err)
			case strings.Contains(err.Error(), "\n"):
				t.Fatalf("%q is more than one line", err)
			}
			want := leases.Lease{}
			if c.unknown {
				want = leases.Lease{Resource: "r", Holder: "A", Epoch: 1, GrantedAt: 10, ExpiresAt: 15}
			}
			if lease != want {
				t.Fatalf("the acquire returned %+v with its error; want %+v", lease, want)
			}
			if after := dump(t, monitor, store); after != before {
				t.Fatalf("the store changed:\n%s\nbecame\n%s", before, after)
			}
			// The store goes on: the next decision is made on what the
			// server holds (here: nothing was committed).
			if b, err := store.Authority().Acquire(ctx, "r", "B", 10, 5); err != nil || b.Epoch != 1 {
				t.Fatalf("the next acquire: %+v, %v; want epoch 1", b, err)
			}
		})
	}
	t.Run("a refusal", func(t *testing.T) {
		ctx := fencetest.Context(t)
		a := newStore(t, database(t, 0).DB, postgres.Options{}).Authority()
		if _, err := a.Acquire(ctx, "r", "A", 10, 5); err != nil {
			t.Fatal(err)
		}
		_, err := a.Acquire(ctx, "r", "B", 11, 5)
		if !leases.IsRefusal(err) || errors.Is(err, leases.ErrOutcomeUnknown) {
			t.Fatalf("%v: want a refusal", err)
		}
	})
}

// faultAt returns ctx with a step hook that, before the store's step at,
// ends the returned context (fault "cancel") or terminates the backend of
// db, a handle of one connection, through monitor (fault "terminate").
func faultAt(t *testing.T, ctx context.Context, monitor, db *sql.DB, at, fault string) context.Context {
	t.Helper()
	var pid int
	if err := db.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	callCtx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	return postgres.WithStep(callCtx, func(step string) {
		if step != at {
			return
		}
		if fault == "cancel" {
			cancel()
			return
		}
		var gone bool
		if err := monitor.QueryRowContext(ctx, `SELECT pg_terminate_backend($1, 10000)`, pid).Scan(&gone); err != nil || !gone {
			t.Errorf("terminate the decision's backend: %v, %v", gone, err)
		}
	})
}

// Options that make no sense are refused before anything is sent.
func TestOptionsAreChecked(t *testing.T) {
	db := &sql.DB{} // never used: New talks to nobody
	for _, opts := range []postgres.Options{
		{Prefix: "Leases_"},
		{Prefix: "1leases_"},
		{Prefix: `x"; DROP TABLE users; --`},
		{Prefix: strings.Repeat("p", 63-len("authority")+1)},
		{Isolation: sql.LevelSnapshot},
		{Isolation: sql.LevelLinearizable},
		{WatchInterval: -1},
	} {
		if _, err := postgres.New(db, opts); !errors.Is(err, leases.ErrInvalidInput) {
			t.Errorf("%+v: %v; want ErrInvalidInput", opts, err)
		}
	}
	for _, opts := range []postgres.Options{
		{},
		{Prefix: strings.Repeat("p", 63-len("authority"))},
		{Isolation: sql.LevelSerializable, Retries: -1, WatchInterval: 1},
	} {
		if _, err := postgres.New(db, opts); err != nil {
			t.Errorf("%+v: %v", opts, err)
		}
	}
}
