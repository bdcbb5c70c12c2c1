package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The plot is drawn from the benchmark's rows, one line per label and
// backend, and the same rows give the same bytes.
func TestDrawsOneLinePerSeries(t *testing.T) {
	file := filepath.Join(t.TempDir(), "rows.json")
	rows := `[{"backend":"etcd","leases":100,"round_ms":2,"round_requests":100,"renew_cpu_us":5,"grants_per_sec":300},
		{"backend":"etcd","leases":1000,"round_ms":20,"round_requests":1000,"renew_cpu_us":5,"grants_per_sec":300},
		{"backend":"sqlite","leases":100,"round_ms":1,"round_requests":-1,"renew_cpu_us":9,"grants_per_sec":900}]`
	if err := os.WriteFile(file, []byte(rows), 0o644); err != nil {
		t.Fatal(err)
	}
	all, err := load([]string{"before=" + file})
	if err != nil {
		t.Fatal(err)
	}
	var a, b bytes.Buffer
	draw(&a, all)
	draw(&b, all)
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("two drawings of the same rows differ")
	}
	svg := a.String()
	for _, want := range []string{"before etcd", "before sqlite", "requests per renewal round", "</svg>"} {
		if !strings.Contains(svg, want) {
			t.Errorf("the SVG lacks %q", want)
		}
	}
	var md bytes.Buffer
	table(&md, all)
	if lines := strings.Split(strings.TrimSpace(md.String()), "\n"); len(lines) != 2+3 || !strings.Contains(lines[4], "| before sqlite | 100 |") || !strings.Contains(lines[4], "| – |") {
		t.Errorf("the table:\n%s\nwant a header, a rule and the 3 rows, the uncounted as –", md.String())
	}
	if _, err := load([]string{"no-label"}); err == nil {
		t.Error("an argument without label= was accepted")
	}
}
