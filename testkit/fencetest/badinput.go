package fencetest

import (
	"errors"
	"strings"
	"testing"

	"leases"
	"leases/fence"
	"leases/leasestest"
)

// BadInput checks that every call with an argument the receiver rule
// refuses (the name rule's leasestest.BadNames among them) returns leases.ErrInvalidInput and runs no statement: the
// table it is given does not exist, so any statement would fail with
// the database's own error, and in PostgreSQL would abort the
// transaction, which must still be usable afterwards.
func BadInput(t *testing.T, db DB) {
	ctx := Context(t)
	table, err := fence.New(db.DB, fence.Options{Dialect: db.Dialect, Table: "fence_never_created"})
	if err != nil {
		t.Fatal(err)
	}
	absent := Fence{table}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback() })
	type call struct {
		name string
		call func() error
	}
	var names []call
	for _, bad := range leasestest.BadNames() {
		names = append(names,
			call{"write: " + bad.Why, func() error { _, err := absent.Write(ctx, tx, bad.Name, 1, "v"); return err }},
			call{"observe: " + bad.Why, func() error { _, err := absent.Observe(ctx, tx, bad.Name, 1); return err }},
			call{"admit: " + bad.Why, func() error { _, err := absent.Admit(ctx, tx, bad.Name, 1); return err }},
			call{"read: " + bad.Why, func() error { _, _, err := absent.Read(ctx, tx, bad.Name); return err }})
	}
	for _, c := range append([]call{
		{"write: empty resource", func() error { _, err := absent.Write(ctx, tx, "", 1, "v"); return err }},
		{"write: epoch 0", func() error { _, err := absent.Write(ctx, tx, "r", 0, "v"); return err }},
		{"write: negative epoch", func() error { _, err := absent.Write(ctx, tx, "r", -1, "v"); return err }},
		{"write: resource not UTF-8", func() error { _, err := absent.Write(ctx, tx, "r\xff", 1, "v"); return err }},
		{"write: resource too long", func() error {
			_, err := absent.Write(ctx, tx, strings.Repeat("r", leases.MaxNameBytes+1), 1, "v")
			return err
		}},
		{"write: NUL in value", func() error { _, err := absent.Write(ctx, tx, "r", 1, "v\x00"); return err }},
		{"write: value too long", func() error {
			_, err := absent.Write(ctx, tx, "r", 1, strings.Repeat("v", leases.MaxValueBytes+1))
			return err
		}},
		{"observe: empty resource", func() error { _, err := absent.Observe(ctx, tx, "", 1); return err }},
		{"observe: epoch 0", func() error { _, err := absent.Observe(ctx, tx, "r", 0); return err }},
		{"admit: empty resource", func() error { _, err := absent.Admit(ctx, tx, "", 1); return err }},
		{"admit: epoch 0", func() error { _, err := absent.Admit(ctx, tx, "r", 0); return err }},
		{"read: empty resource", func() error { _, _, err := absent.Read(ctx, tx, ""); return err }},
	}, names...) {
		t.Run(c.name, func(t *testing.T) {
			err := c.call()
			if !errors.Is(err, leases.ErrInvalidInput) {
				t.Fatalf("got %v, want %v", err, leases.ErrInvalidInput)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error is more than one line: %q", err)
			}
		})
	}
	var one int
	if err := tx.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		t.Errorf("transaction unusable after the refused calls, so one of them ran: %v", err)
	}
	if _, _, err := absent.Read(ctx, tx, "r"); err == nil {
		t.Errorf("reading a table that does not exist succeeded: the check above shows nothing")
	}
}
