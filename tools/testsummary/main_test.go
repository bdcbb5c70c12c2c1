package main

import (
	"strings"
	"testing"
)

// The summary passes package results and failing tests' output on, and
// ends with the skipped tests grouped by the reason they gave; a failure,
// or no package result at all, is exit status 1.
func TestSummary(t *testing.T) {
	for _, c := range []struct {
		name, events string
		want         []string
		code         int
	}{
		{"passes", `{"Action":"pass","Package":"p","Elapsed":0.5}`, []string{"ok  \tp\t0.500s", "skipped: none"}, 0},
		{"skips grouped by reason", strings.Join([]string{
			`{"Action":"run","Package":"p","Test":"TestA"}`,
			`{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}`,
			`{"Action":"output","Package":"p","Test":"TestA","Output":"    a_test.go:12: strace not found\n"}`,
			`{"Action":"skip","Package":"p","Test":"TestA"}`,
			`{"Action":"output","Package":"p","Test":"TestB","Output":"    b_test.go:3: strace not found\n"}`,
			`{"Action":"skip","Package":"p","Test":"TestB"}`,
			`{"Action":"output","Package":"q","Test":"TestC","Output":"    c_test.go:9: postgresql not installed\n"}`,
			`{"Action":"skip","Package":"q","Test":"TestC"}`,
			`{"Action":"skip","Package":"r"}`,
			`{"Action":"pass","Package":"p","Elapsed":1}`,
			`{"Action":"pass","Package":"q","Elapsed":1}`,
		}, "\n"), []string{"skipped: 3 tests (1: postgresql not installed; 2: strace not found)"}, 0},
		{"a failure shows its output", strings.Join([]string{
			`{"Action":"output","Package":"p","Test":"TestA","Output":"    a_test.go:5: wrong\n"}`,
			`{"Action":"fail","Package":"p","Test":"TestA"}`,
			`{"Action":"output","Package":"p","Output":"FAIL\tp\t0.1s\n"}`,
			`{"Action":"fail","Package":"p","Elapsed":0.1}`,
		}, "\n"), []string{"a_test.go:5: wrong", "FAIL\tp\t0.1s"}, 1},
		{"no package result", `not json: a build error`, []string{"not json: a build error"}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out strings.Builder
			code := run(strings.NewReader(c.events), &out)
			for _, w := range c.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output %q lacks %q", out.String(), w)
				}
			}
			if code != c.code {
				t.Errorf("exit %d, want %d", code, c.code)
			}
		})
	}
}
