package sqlite_test

// Reliability under bad and hostile input, to the library and to the
// command. Not among the contract's 17 tests.

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"leases"
	"leases/testkit/contract"
	"leases/testkit/sqlitetest"
	"leases/testkit/testctx"
)

// Every invalid argument is refused with ErrInvalidInput, in one short
// line, and leaves every row as it was: the contract's bad calls, and the
// extremes and the fields they leave out.
func TestInvalidInputIsRefusedAndChangesNothing(t *testing.T) {
	b := sqlitetest.Backend(t)
	s := contract.Calls{B: b, Held: contract.BadInputSetup(t, b)}
	fenced, unfenced := b.Fenced, b.Unfenced
	long := strings.Repeat("n", leases.MaxNameBytes+1)
	huge := strings.Repeat("v", 1<<20)
	contract.RefuseEach(t, b, append(contract.BadInputCalls(b, s.Held),
		bad("acquire: ttl MinInt64", s.Acquire("r", "B", 20, math.MinInt64)),
		bad("acquire: tick MinInt64", s.Acquire("new", "B", math.MinInt64, 1)),
		bad("acquire: tick+ttl overflows", s.Acquire("r", "B", math.MaxInt64, 1)),
		bad("acquire: holder 1 MiB", s.Acquire("r", huge, 20, 1)),
		bad("acquire: NUL in holder", s.Acquire("r", "B\x00'; DELETE FROM authority_leases; --", 20, 1)),
		bad("acquire: invalid UTF-8 resource", s.Acquire("\xc3\x28", "B", 20, 1)),
		bad("renew: epoch -1", s.Renew(s.HeldWith(func(l *leases.Lease) { l.Epoch = -1 }), 6, 1)),
		bad("renew: empty holder", s.Renew(s.HeldWith(func(l *leases.Lease) { l.Holder = "" }), 6, 1)),
		bad("renew: tick -1", s.Renew(s.Held, -1, 1)),
		bad("renew: tick+ttl overflows", s.Renew(s.Held, 6, math.MaxInt64)),
		bad("release: epoch 0", s.Release(s.HeldWith(func(l *leases.Lease) { l.Epoch = 0 }), 6)),
		bad("release: empty resource", s.Release(s.HeldWith(func(l *leases.Lease) { l.Resource = "" }), 6)),
		bad("release: tick -1", s.Release(s.Held, -1)),
		bad("write: epoch MinInt64", s.Write(fenced, "r", math.MinInt64, "x")),
		bad("write: value 1 MiB", s.Write(fenced, "r", 2, huge)),
		bad("write: NUL in value", s.Write(fenced, "r", 2, "x\x00y")),
		bad("write: invalid UTF-8 value", s.Write(fenced, "r", 2, "\xff")),
		bad("unfenced write: NUL in resource", s.Write(unfenced, "r\x00", 2, "x")),
		bad("observe: epoch 0", s.Fence(fenced, "r", 0)),
		bad("observe: empty resource", s.Fence(fenced, "", 2)),
		bad("observe: an unfenced receiver", s.Fence(unfenced, "r", 2)),
		bad("read: empty resource", s.Read("")),
		bad("read: resource 257 bytes", s.Read(long)),
		bad("holder: NUL in resource", s.Holder("r\x00", 6)),
		bad("holder: tick MinInt64", s.Holder("r", math.MinInt64)),
	), 300)
}

// Names and values that look like SQL, quotes, or other scripts are data:
// stored and read back verbatim, and no other row is touched.
func TestHostileButValidInputIsStoredVerbatim(t *testing.T) {
	ctx := context.Background()
	path := sqlitetest.Path(t)
	store := sqlitetest.Open(t, path)
	auth, fenced := store.Authority(), store.Receiver(leases.Fenced)
	mustAcquire(t, auth, "bystander", "Z", 0, 100)
	contract.MustWrite(t, fenced, "bystander", 1, "untouched")
	bystanders := sqlitetest.Dump(t, path)

	for _, name := range []string{
		`O'Brien "quoted" \backslash`,
		`r'); DROP TABLE authority_leases; --`,
		`' OR '1'='1`,
		"Ünïcödé 資源 🚀",
		" spaced  out ",
		strings.Repeat("n", leases.MaxNameBytes),
	} {
		lease, err := auth.Acquire(ctx, name, name, 0, 5)
		if err != nil || lease.Resource != name || lease.Holder != name || lease.Epoch != 1 {
			t.Fatalf("acquire %q: %+v, %v", name, lease, err)
		}
		value := name + strings.Repeat("v", leases.MaxValueBytes-len(name))
		if got, err := fenced.Write(ctx, name, lease.Epoch, value); err != nil || got.Outcome != leases.Accepted {
			t.Fatalf("write %q: %+v, %v", name, got, err)
		}
		if got, found, err := fenced.Read(ctx, name); err != nil || !found || got.Value != value {
			t.Fatalf("read %q back: found %v, %v, value intact %v", name, found, err, got.Value == value)
		}
	}
	after := sqlitetest.Dump(t, path)
	for _, row := range strings.Split(strings.TrimSpace(bystanders), "\n") {
		if !strings.Contains(after, row) {
			t.Fatalf("the bystander row %s changed", row)
		}
	}
	if check, err := store.IntegrityCheck(ctx); err != nil || check != "ok" {
		t.Fatalf("integrity_check: %q, %v", check, err)
	}
}

// The one rule for names holds at the Lessor, its listing and its watch,
// and at the store's tenure: each bad name is refused
// with ErrInvalidInput and no row of the file changes.
func TestBadNamesAreRefusedAndChangeNothing(t *testing.T) {
	ctx := testctx.Context(t)
	path := sqlitetest.Path(t)
	store := sqlitetest.Open(t, path)
	state := func(t *testing.T) string { return sqlitetest.Dump(t, path) }
	t.Run("lessor", func(t *testing.T) { contract.LessorRefusesBadNames(t, store.Lessor(), state) })

	held, err := store.Lessor().Acquire(ctx, "guarded", "G", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var calls []contract.BadCall
	for _, name := range contract.BadNames {
		for _, change := range []struct {
			what string
			set  func(l *leases.Lease)
		}{
			{"resource", func(l *leases.Lease) { l.Resource = name.Name }},
			{"holder", func(l *leases.Lease) { l.Holder = name.Name }},
		} {
			lease := held
			change.set(&lease)
			calls = append(calls, bad("tenure: "+change.what+": "+name.Why, func() error {
				_, err := store.Tenure(ctx, lease)
				return err
			}))
		}
	}
	contract.RefuseEach(t, contract.Backend{State: state}, calls, 300)
}

// bad names a call that must be refused as invalid input.
func bad(name string, call func() error) contract.BadCall {
	return contract.BadCall{Name: name, Call: call}
}
