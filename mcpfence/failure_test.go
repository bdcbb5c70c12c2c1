package mcpfence_test

import (
	"testing"

	"leases/mcpfence"
)

// A call the record could not answer (its database is gone) is a tool
// error that says nothing was done and a retry is safe, with _meta
// leases/failure "failed", and no outcome.
func TestRecordFailureSaysNothingWasDone(t *testing.T) {
	ts := newToolServer(t)
	cs := connect(t, ts.server())
	if err := ts.db.Close(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tool      string
		arguments any
	}{{"add_note", Note{Text: "x"}}, {"send", Send{To: "ops"}}} {
		res := call(t, cs, tc.tool, tc.arguments, token("r", 1, "k"))
		want(t, res, "", true, "failed: nothing was done", "retrying the same call is safe")
		if got := res.Meta[mcpfence.MetaFailure]; got != "failed" {
			t.Fatalf("%s: _meta %s = %v, want failed", tc.tool, mcpfence.MetaFailure, got)
		}
	}
	if n := ts.sent.Load(); n != 0 {
		t.Fatalf("send's effect happened %d times with no record; want none", n)
	}
}
