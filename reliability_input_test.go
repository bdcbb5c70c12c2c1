package leases_test

// Reliability under bad and hostile input, to the library and to the
// command. Not among the contract's 17 tests.

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"leases"
	"leases/internal/experiment"
)

// Every invalid argument is refused with ErrInvalidInput, in one line, and
// leaves every row as it was.
func TestInvalidInputIsRefusedAndChangesNothing(t *testing.T) {
	ctx := context.Background()
	path := tempDBPath(t)
	store := openStore(t, path)
	auth, fenced, unfenced := store.Authority(), store.Receiver(leases.Fenced), store.Receiver(leases.Unfenced)
	held := mustAcquire(t, auth, "r", "A", 5, 10)
	mustWrite(t, fenced, "r", held.Epoch, "v")
	before := dumpTables(t, path)

	long := strings.Repeat("n", leases.MaxNameBytes+1)
	huge := strings.Repeat("v", 1<<20)
	lease := func(change func(*leases.Lease)) leases.Lease { l := held; change(&l); return l }
	type call = func() error
	acquire := func(resource, holder string, now, ttl int64) call {
		return func() error { _, err := auth.Acquire(ctx, resource, holder, now, ttl); return err }
	}
	renew := func(l leases.Lease, now, ttl int64) call {
		return func() error { _, err := auth.Renew(ctx, l, now, ttl); return err }
	}
	release := func(l leases.Lease, now int64) call { return func() error { return auth.Release(ctx, l, now) } }
	write := func(r *leases.Receiver, resource string, epoch int64, value string) call {
		return func() error { _, err := r.Write(ctx, resource, epoch, value); return err }
	}
	observe := func(r *leases.Receiver, resource string, epoch int64) call {
		return func() error { _, err := r.Observe(ctx, resource, epoch); return err }
	}
	read := func(resource string) call {
		return func() error { _, _, err := fenced.Read(ctx, resource); return err }
	}

	cases := map[string]call{
		"acquire: empty resource":              acquire("", "B", 20, 1),
		"acquire: empty holder":                acquire("r", "", 20, 1),
		"acquire: ttl 0":                       acquire("r", "B", 20, 0),
		"acquire: ttl -1":                      acquire("r", "B", 20, -1),
		"acquire: ttl MinInt64":                acquire("r", "B", 20, math.MinInt64),
		"acquire: tick -1":                     acquire("new", "B", -1, 1),
		"acquire: tick MinInt64":               acquire("new", "B", math.MinInt64, 1),
		"acquire: tick before the last change": acquire("r", "B", 4, 1),
		"acquire: tick+ttl overflows":          acquire("r", "B", math.MaxInt64, 1),
		"acquire: resource 257 bytes":          acquire(long, "B", 20, 1),
		"acquire: holder 1 MiB":                acquire("r", huge, 20, 1),
		"acquire: NUL in resource":             acquire("r\x00", "B", 20, 1),
		"acquire: NUL in holder":               acquire("r", "B\x00'; DELETE FROM authority_leases; --", 20, 1),
		"acquire: invalid UTF-8 resource":      acquire("\xc3\x28", "B", 20, 1),
		"renew: epoch 0":                       renew(lease(func(l *leases.Lease) { l.Epoch = 0 }), 6, 1),
		"renew: epoch -1":                      renew(lease(func(l *leases.Lease) { l.Epoch = -1 }), 6, 1),
		"renew: empty holder":                  renew(lease(func(l *leases.Lease) { l.Holder = "" }), 6, 1),
		"renew: ttl 0":                         renew(held, 6, 0),
		"renew: tick -1":                       renew(held, -1, 1),
		"renew: tick before the last change":   renew(held, 4, 1),
		"renew: tick+ttl overflows":            renew(held, 6, math.MaxInt64),
		"release: epoch 0":                     release(lease(func(l *leases.Lease) { l.Epoch = 0 }), 6),
		"release: empty resource":              release(lease(func(l *leases.Lease) { l.Resource = "" }), 6),
		"release: tick -1":                     release(held, -1),
		"release: tick before the last change": release(held, 4),
		"write: epoch 0":                       write(fenced, "r", 0, "x"),
		"write: epoch MinInt64":                write(fenced, "r", math.MinInt64, "x"),
		"write: empty resource":                write(fenced, "", 2, "x"),
		"write: value 64 KiB + 1":              write(fenced, "r", 2, strings.Repeat("x", leases.MaxValueBytes+1)),
		"write: value 1 MiB":                   write(fenced, "r", 2, huge),
		"write: NUL in value":                  write(fenced, "r", 2, "x\x00y"),
		"write: invalid UTF-8 value":           write(fenced, "r", 2, "\xff"),
		"write: unknown receiver mode":         write(store.Receiver("half-fenced"), "r", 2, "x"),
		"unfenced write: epoch 0":              write(unfenced, "r", 0, "x"),
		"unfenced write: NUL in resource":      write(unfenced, "r\x00", 2, "x"),
		"observe: epoch 0":                     observe(fenced, "r", 0),
		"observe: empty resource":              observe(fenced, "", 2),
		"observe: an unfenced receiver":        observe(unfenced, "r", 2),
		"read: empty resource":                 read(""),
		"read: resource 257 bytes":             read(long),
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			err := c()
			if !errors.Is(err, leases.ErrInvalidInput) || strings.Contains(err.Error(), "\n") || len(err.Error()) > 300 {
				t.Fatalf("got %v; want one short line matching ErrInvalidInput", err)
			}
			if after := dumpTables(t, path); after != before {
				t.Fatalf("the database changed:\n%s\nbecame\n%s", before, after)
			}
		})
	}
}

// Names and values that look like SQL, quotes, or other scripts are data:
// stored and read back verbatim, and no other row is touched.
func TestHostileButValidInputIsStoredVerbatim(t *testing.T) {
	ctx := context.Background()
	path := tempDBPath(t)
	store := openStore(t, path)
	auth, fenced := store.Authority(), store.Receiver(leases.Fenced)
	mustAcquire(t, auth, "bystander", "Z", 0, 100)
	mustWrite(t, fenced, "bystander", 1, "untouched")
	bystanders := dumpTables(t, path)

	for _, name := range []string{
		`O'Brien "quoted" \backslash`,
		`r'); DROP TABLE authority_leases; --`,
		`' OR '1'='1`,
		"Ünïcödé 資源 🚀",
		"line\nbreak\ttab",
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
	after := dumpTables(t, path)
	for _, row := range strings.Split(strings.TrimSpace(bystanders), "\n") {
		if !strings.Contains(after, row) {
			t.Fatalf("the bystander row %s changed", row)
		}
	}
	if check, err := store.IntegrityCheck(ctx); err != nil || check != "ok" {
		t.Fatalf("integrity_check: %q, %v", check, err)
	}
}

// Every bad use of the command: one line on stderr, a non-zero exit,
// nothing on stdout, and no file written.
func TestCommandRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string { return writeFile(t, dir, name, content) }
	valid := committedResults(t)
	checked := write("checked.json", string(valid))
	linked := filepath.Join(dir, "linked.json")
	if err := os.Symlink(checked, linked); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.json")
	usage := []struct {
		name string
		args []string
	}{
		{"unknown flag", []string{"--frobnicate"}},
		{"unknown short flag", []string{"-x"}},
		{"flag without its value", []string{"--output"}},
		{"stray argument", []string{"results.json"}},
		{"timeout 0", []string{"--timeout", "0s"}},
		{"negative timeout", []string{"--timeout", "-1s"}},
		{"timeout not a duration", []string{"--timeout", "soon"}},
		{"0 workers", []string{"--workers", "0"}},
		{"too many workers", []string{"--workers", "5"}},
		{"workers not a number", []string{"--workers", "three"}},
		{"ttl 0", []string{"--ttl", "0"}},
		{"negative last tick", []string{"--last-tick", "-1"}},
		{"missing --check file", []string{"--check", filepath.Join(dir, "absent.json")}},
		{"empty --check file", []string{"--check", write("empty.json", "")}},
		{"truncated --check file", []string{"--check", write("truncated.json", string(valid[:len(valid)-10]))}},
		{"not JSON", []string{"--check", write("text.json", "schema: leases\n")}},
		{"JSON then garbage", []string{"--check", write("trailing.json", string(valid)+"x")}},
		{"a directory as --check", []string{"--check", dir}},
		{"--output into a missing directory", []string{"--output", filepath.Join(dir, "missing", "out.json")}},
		{"--output onto the --check file", []string{"--check", checked, "--output", checked}},
		{"--output onto a link to the --check file", []string{"--check", checked, "--output", linked}},
	}
	for _, tc := range usage {
		t.Run(tc.name, func(t *testing.T) {
			// --output first: a case's own --output comes later and wins.
			code, stdout, stderr := runCommand(t, append([]string{"--output", out}, tc.args...)...)
			if code != experiment.ExitUsage || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "run-experiment: ") {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 2 and one line", code, stdout, stderr)
			}
			if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("a refused run wrote %s", out)
			}
		})
	}
	if got, _ := os.ReadFile(checked); string(got) != string(valid) {
		t.Error("the --check file was changed")
	}

	t.Run("fields removed or added", func(t *testing.T) {
		for name, tampered := range map[string]struct{ content, path string }{
			"removed": {strings.Replace(string(valid), `"schema": "leases-experiment/3",`+"\n  ", "", 1), "$.schema"},
			"added":   {strings.Replace(string(valid), `"ttl": 2,`, `"ttl": 2, "clock_skew": 0,`, 1), "$.exploration.bounds.clock_skew"},
		} {
			t.Run(name, func(t *testing.T) {
				t.Parallel() // a whole run each
				if tampered.content == string(valid) {
					t.Fatal("the tampering changed nothing")
				}
				code, last := checkTampered(t, tampered.content)
				if code != experiment.ExitMismatch || !strings.Contains(last, tampered.path) {
					t.Fatalf("exit %d, last line %q; want exit 1 naming %s", code, last, tampered.path)
				}
			})
		}
	})
}
