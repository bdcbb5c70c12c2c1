package command

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// An --output that cannot be written is refused before anything runs:
// exit 2 and one line, not a failure at the end of a whole run whose
// verdict is then never shown.
func TestCommandRefusesUnwritableOutput(t *testing.T) {
	cases := []struct {
		name   string
		output func(t *testing.T) string
		want   string
	}{
		{"a read-only directory", func(t *testing.T) string {
			return filepath.Join(readOnlyDir(t), "out.json")
		}, "cannot be written: no new file can be made in "},
		{"a directory that does not exist", func(t *testing.T) string {
			return filepath.Join(t.TempDir(), "missing", "out.json")
		}, "does not exist"},
		{"a path that is a directory", func(t *testing.T) string { return t.TempDir() }, "is a directory"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			output := tc.output(t)
			before := listed(t, filepath.Dir(output))
			if line := refused(t, "run-experiment: --output ", "--output", output); !strings.Contains(line, tc.want) {
				t.Errorf("stderr %q; want it to say %q", line, tc.want)
			}
			if after := listed(t, filepath.Dir(output)); !slices.Equal(after, before) {
				t.Errorf("the refused run changed %s: %v became %v", filepath.Dir(output), before, after)
			}
		})
	}
}

// The check that --output can be written leaves nothing behind: a run
// with no backend writes the one file it was asked for, and nothing else.
func TestCommandOutputCheckLeavesNothingBehind(t *testing.T) {
	dir := t.TempDir()
	output := filepath.Join(dir, "out.json")
	var stdout, stderr strings.Builder
	if code := Main(t.Context(), nil, []string{"--output", output}, &stdout, &stderr); code != ExitMatch {
		t.Fatalf("exit %d; stderr %q", code, stderr.String())
	}
	if got := listed(t, dir); !slices.Equal(got, []string{"out.json"}) {
		t.Fatalf("the directory holds %v; want only out.json", got)
	}
}

// listed returns the names in dir, or nil if dir does not exist.
func listed(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}
