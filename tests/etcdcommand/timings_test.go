package etcdcommand_test

import (
	"path/filepath"
	"regexp"
	"testing"
)

// --timings sets the etcd parts next to floors measured in the same run
// (on a cluster of their own, which goes with the run): each part that
// has a floor, and the whole, shows a ratio.
func TestTimingsFloorTheEtcdParts(t *testing.T) {
	got := run{}.start(t, "--timings", "--output", filepath.Join(t.TempDir(), "out.json"))
	if got.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", got.code, got.stderr)
	}
	for _, part := range []string{
		`start \(a cluster; floor: one started alone\)`, `scenarios that stop a member, alone`,
		`scenarios, beside the exploration`, `exploration steps \(\d+ of them one after another\)`,
		`the backend, from its start to its end`, `total \(floor: the longest of etcd\)`,
	} {
		if !regexp.MustCompile(`(?m)^  ` + part + ` .* \d+\.\d\dx$`).MatchString(got.stderr) {
			t.Errorf("no line %q with a ratio to its floor in:\n%s", part, got.stderr)
		}
	}
	for _, floor := range []string{`leaders stopped \(an election; floor: alone\) +1 `, `members restarted \(floor: alone\) +1 `} {
		if !regexp.MustCompile(`(?m)^  ` + floor + `+\d+\.\d{3} ms`).MatchString(got.stderr) {
			t.Errorf("no line %q with its floor in:\n%s", floor, got.stderr)
		}
	}
}
