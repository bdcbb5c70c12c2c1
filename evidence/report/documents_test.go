package report

import "testing"

func TestRewrite(t *testing.T) {
	blocks := map[string]string{"diagram x": "sequenceDiagram\n    A->>B: hi\n", "table t": "| a |\n|---|\n"}
	in := "intro\n<!-- generated: diagram x -->\nstale\n<!-- end -->\nmiddle\n<!-- generated: table t -->\n<!-- end -->\n"
	want := "intro\n<!-- generated: diagram x -->\n```mermaid\nsequenceDiagram\n    A->>B: hi\n```\n<!-- end -->\nmiddle\n<!-- generated: table t -->\n| a |\n|---|\n<!-- end -->\n"
	got, names, err := Rewrite(in, blocks)
	if err != nil || got != want || len(names) != 2 {
		t.Fatalf("got %q, %v, %v; want %q", got, names, err, want)
	}
	for _, bad := range []string{"<!-- generated: nothing -->\n<!-- end -->\n", "<!-- generated: table t -->\nno end\n"} {
		if _, _, err := Rewrite(bad, blocks); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
