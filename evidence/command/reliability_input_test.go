package command_test

// Reliability under bad input to the command. Not among the contract's 17
// tests.

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"leases/evidence/command"
	"leases/evidence/experimenttest"
)

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
			"removed": {strings.Replace(string(valid), `"schema": "leases-experiment/5",`+"\n  ", "", 1), "$.schema: missing"},
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
