package command

import (
	"path/filepath"
	"strings"
	"testing"
)

// A --check file that is JSON, but not of the shape the command writes,
// can never match: it is refused before anything runs (exit 2, one line
// naming the file and where it differs), not after a whole run as a
// mismatch (exit 1).
func TestCommandRefusesCheckFileOfAnotherShape(t *testing.T) {
	valid := committed(t)
	replace := func(old, new string) string {
		if !strings.Contains(valid, old) {
			t.Fatalf("results.json has no %q", old)
		}
		return strings.Replace(valid, old, new, 1)
	}
	cases := []struct{ name, content, where string }{
		{"an array of numbers", `[1,2,3]`, "at $: expected an object"},
		{"a string", `"results"`, "at $: expected an object"},
		{"an empty object", `{}`, "at $.schema: missing"},
		{"a string where a number goes", replace(`"tick": 0,`, `"tick": "0",`), "at $.backends[0].scenarios[0].steps[0].tick: expected an integer"},
		{"a key missing", replace(`"schema": "leases-experiment/5",`, ``), "at $.schema: missing"},
		{"a key added", replace(`"bounds": {`, `"bounds": {"clock_skew": 0,`), "at $.backends[0].exploration.bounds.clock_skew: no such key"},
		{"another schema", replace(`"schema": "leases-experiment/5"`, `"schema": "leases-experiment/3"`), "at $.schema: this command writes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			check := filepath.Join(dir, "check.json")
			writeTestFile(t, check, tc.content)
			refused(t, "run-experiment: --check file "+check+" is not a results document: "+tc.where,
				"--check", check, "--output", filepath.Join(dir, "out.json"))
		})
	}
}
