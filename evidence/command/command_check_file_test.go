package command

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A malformed --check file stops the command before anything runs: exit 2,
// one line on standard error naming the file, nothing on standard output.
// A file nested deep enough to overflow the stack was a crash of the whole
// command before parseJSON had a depth limit. --output names a missing
// directory, the next thing the command checks: a file wrongly accepted
// fails there, at once, rather than starting workers.
func TestCommandRefusesMalformedCheckFile(t *testing.T) {
	deep := 5_000_000 // 10 MB of brackets: past the 1 GB stack without the limit
	cases := []struct{ name, content string }{
		{"a key that is a number", `{1:2}`},
		{"a trailing comma", `{"a":1,}`},
		{"a duplicate key", `{"a":1,"a":1}`},
		{"a byte that is not UTF-8", "\"\xff\""},
		{"brackets nested millions deep", strings.Repeat("[", deep) + strings.Repeat("]", deep)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			check, output := filepath.Join(dir, "check.json"), filepath.Join(dir, "missing", "out.json")
			writeTestFile(t, check, tc.content)
			var stdout, stderr strings.Builder
			code := Main(t.Context(), nil, []string{"--check", check, "--output", output}, &stdout, &stderr)
			want := "run-experiment: --check file " + check + " is not valid JSON: "
			if code != ExitUsage || stdout.Len() != 0 || strings.Count(stderr.String(), "\n") != 1 ||
				!strings.HasPrefix(stderr.String(), want) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d and one line starting %q",
					code, stdout.String(), stderr.String(), ExitUsage, want)
			}
		})
	}
}

// writeTestFile writes content to path.
func writeTestFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
