package sqlite_test

// Reliability under bad and hostile input, to the library and to the
// command. Not among the contract's 17 tests.

import (
	"context"
	"errors"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"

	"leases"
	"leases/testkit/sqlitetest"
)

// Every invalid argument is refused with ErrInvalidInput, in one short
// line, and leaves every row as it was: the extremes and the fields that
// the contract's bad calls (leasestest.BadInput, in TestContract) leave
// out, on a store as that clause sets it up, A's live lease on "r".
func TestInvalidInputIsRefusedAndChangesNothing(t *testing.T) {
	ctx := context.Background()
	b := sqlitetest.Backend(t)
	auth, fenced, unfenced := b.Authority, b.Fenced, b.Unfenced
	held := mustAcquire(t, auth, "r", "A", 5, 10)
	mustWrite(t, fenced, "r", held.Epoch, "v")
	with := func(change func(*leases.Lease)) leases.Lease {
		l := held
		change(&l)
		return l
	}
	acquire := func(resource, holder string, now, ttl int64) func() error {
		return func() error { _, err := auth.Acquire(ctx, resource, holder, now, ttl); return err }
	}
	renew := func(l leases.Lease, now, ttl int64) func() error {
		return func() error { _, err := auth.Renew(ctx, l, now, ttl); return err }
	}
	release := func(l leases.Lease, now int64) func() error { return func() error { return auth.Release(ctx, l, now) } }
	write := func(r leases.Receiver, resource string, epoch int64, value string) func() error {
		return func() error { _, err := r.Write(ctx, resource, epoch, value); return err }
	}
	long := strings.Repeat("n", leases.MaxNameBytes+1)
	huge := strings.Repeat("v", 1<<20)
	refuseEach(t, b.State, map[string]func() error{
		"acquire: ttl MinInt64":           acquire("r", "B", 20, math.MinInt64),
		"acquire: tick MinInt64":          acquire("new", "B", math.MinInt64, 1),
		"acquire: tick+ttl overflows":     acquire("r", "B", math.MaxInt64, 1),
		"acquire: holder 1 MiB":           acquire("r", huge, 20, 1),
		"acquire: NUL in holder":          acquire("r", "B\x00'; DELETE FROM authority_leases; --", 20, 1),
		"acquire: invalid UTF-8 resource": acquire("\xc3\x28", "B", 20, 1),
		"renew: epoch -1":                 renew(with(func(l *leases.Lease) { l.Epoch = -1 }), 6, 1),
		"renew: empty holder":             renew(with(func(l *leases.Lease) { l.Holder = "" }), 6, 1),
		"renew: tick+ttl overflows":       renew(held, 6, math.MaxInt64),
		"release: epoch 0":                release(with(func(l *leases.Lease) { l.Epoch = 0 }), 6),
		"release: empty resource":         release(with(func(l *leases.Lease) { l.Resource = "" }), 6),
		"write: epoch MinInt64":           write(fenced, "r", math.MinInt64, "x"),
		"write: value 1 MiB":              write(fenced, "r", 2, huge),
		"write: NUL in value":             write(fenced, "r", 2, "x\x00y"),
		"write: invalid UTF-8 value":      write(fenced, "r", 2, "\xff"),
		"unfenced write: NUL in resource": write(unfenced, "r\x00", 2, "x"),
		"fence: empty resource":           func() error { _, err := fenced.Fence(ctx, "", 2); return err },
		"read: resource 257 bytes":        func() error { _, _, err := fenced.Read(ctx, long); return err },
		"lease: NUL in resource":          func() error { _, _, err := auth.Lease(ctx, "r\x00", 6); return err },
		"lease: tick MinInt64":            func() error { _, _, err := auth.Lease(ctx, "r", math.MinInt64); return err },
	})
}

// refuseEach runs each call in a subtest of its own and fails it unless
// the call is refused with ErrInvalidInput, in one line of at most 300
// bytes, and the store's state is as it was.
func refuseEach(t *testing.T, state func(context.Context) (string, error), calls map[string]func() error) {
	t.Helper()
	before, err := state(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range slices.Sorted(maps.Keys(calls)) {
		t.Run(name, func(t *testing.T) {
			err := calls[name]()
			if !errors.Is(err, leases.ErrInvalidInput) || strings.Contains(err.Error(), "\n") || len(err.Error()) > 300 {
				t.Fatalf("got %v; want one line of at most 300 bytes matching ErrInvalidInput", err)
			}
			if after, err := state(t.Context()); err != nil || after != before {
				t.Fatalf("the store changed (%v):\n%s\nbecame\n%s", err, before, after)
			}
		})
	}
}

// Names and values that look like SQL, quotes, or other scripts are data:
// stored and read back verbatim, and no other row is touched.
func TestHostileButValidInputIsStoredVerbatim(t *testing.T) {
	ctx := context.Background()
	path := sqlitetest.Path(t)
	store := sqlitetest.Open(t, path)
	auth, fenced := store.Authority(), store.Receiver(leases.Fenced)
	mustAcquire(t, auth, "bystander", "Z", 0, 100)
	mustWrite(t, fenced, "bystander", 1, "untouched")
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
