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
	"leases/internal/contract"
	"leases/internal/experiment/command"
	"leases/internal/experiment/experimenttest"
	"leases/internal/sqlitetest"
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
		bad("observe: epoch 0", s.Observe(fenced, "r", 0)),
		bad("observe: empty resource", s.Observe(fenced, "", 2)),
		bad("observe: an unfenced receiver", s.Observe(unfenced, "r", 2)),
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

// Every bad use of the command: one line on stderr, a non-zero exit,
// nothing on stdout, and no file written.
func TestCommandRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string { return experimenttest.WriteFile(t, dir, name, content) }
	valid := experimenttest.CommittedResults(t)
	checked := write("checked.json", string(valid))
	linked := filepath.Join(dir, "linked.json")
	if err := os.Symlink(checked, linked); err != nil {
		t.Fatal(err)
	}
	dangling, dirLink := filepath.Join(dir, "dangling.json"), filepath.Join(dir, "dir-link")
	if err := errors.Join(os.Symlink("absent.json", dangling), os.Symlink(dir, dirLink)); err != nil {
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
		{"--check of another shape", []string{"--check", write("array.json", "[1,2,3]")}},
		{"--check with a string where a number goes", []string{"--check", write("string.json", strings.Replace(string(valid), `"tick": 0,`, `"tick": "0",`, 1))}},
		{"--output into a missing directory", []string{"--output", filepath.Join(dir, "missing", "out.json")}},
		{"--output a directory", []string{"--output", dir}},
		{"--output a link to a directory", []string{"--output", dirLink}},
		{"--output a link to nothing", []string{"--output", dangling}},
		{"--output onto the --check file", []string{"--check", checked, "--output", checked}},
		{"--output onto a link to the --check file", []string{"--check", checked, "--output", linked}},
	}
	for _, tc := range usage {
		t.Run(tc.name, func(t *testing.T) {
			// --output first: a case's own --output comes later and wins.
			code, stdout, stderr := experimenttest.RunCommand(t, append([]string{"--output", out}, tc.args...)...)
			if code != command.ExitUsage || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "run-experiment: ") {
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
		// A --check file with a key the command always writes left out,
		// or one it never writes added, is refused before the run, naming
		// the key.
		for name, tampered := range map[string]struct{ content, path string }{
			"removed": {strings.Replace(string(valid), `"schema": "leases-experiment/4",`+"\n  ", "", 1), "$.schema: missing"},
			"added":   {strings.Replace(string(valid), `"bounds": {`, `"bounds": {"clock_skew": 0,`, 1), "$.backends[0].exploration.bounds.clock_skew: no such key"},
		} {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				if tampered.content == string(valid) {
					t.Fatal("the tampering changed nothing")
				}
				code, last := experimenttest.CheckTampered(t, tampered.content)
				if code != command.ExitUsage || !strings.Contains(last, tampered.path) {
					t.Fatalf("exit %d, last line %q; want exit 2 naming %s", code, last, tampered.path)
				}
			})
		}
	})
}

// bad names a call that must be refused as invalid input.
func bad(name string, call func() error) contract.BadCall {
	return contract.BadCall{Name: name, Call: call}
}
