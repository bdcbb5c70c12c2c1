package leases_test

// The README and docs/ show the run: every picture and every figure in a
// generated block is what results.json makes of it, and every picture the
// run makes is in some document. Not among the contract's 17 tests.

import (
	"encoding/json"
	"flag"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"leases/internal/report"
	"leases/internal/results"
)

var update = flag.Bool("update", false, "rewrite the generated blocks of README.md and docs/ from results.json")

// The documents whose generated blocks are held to the run.
func documents(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"README.md"}, docs...)
}

// Run TestDocumentsShowTheRun with -update (go test -run
// TestDocumentsShowTheRun . -update) after the command has rewritten
// results.json, to redraw the pictures and tables from it.
func TestDocumentsShowTheRun(t *testing.T) {
	var doc results.Results
	if err := json.Unmarshal(committedResults(t), &doc); err != nil {
		t.Fatal(err)
	}
	blocks, err := report.Blocks(&doc)
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, path := range documents(t) {
		text, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		rewritten, names, err := report.Rewrite(string(text), blocks)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		for _, name := range names {
			used[name] = true
		}
		if rewritten == string(text) {
			continue
		}
		if *update {
			if err := os.WriteFile(path, []byte(rewritten), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		t.Errorf("%s: a generated block differs from what results.json makes of it, first at line %d; "+
			"rerun with -update to redraw it", path, firstDifferingLine(string(text), rewritten))
	}
	for _, name := range slices.Sorted(maps.Keys(blocks)) {
		if !used[name] {
			t.Errorf("no document shows the block %q", name)
		}
	}
}

func firstDifferingLine(a, b string) int {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			return i + 1
		}
	}
	return min(len(al), len(bl)) + 1
}

// The README's count of the contract's tests is the count in
// leases_test.go.
func TestReadmeCountsTheContractTests(t *testing.T) {
	src, err := os.ReadFile("leases_test.go")
	if err != nil {
		t.Fatal(err)
	}
	n := len(regexp.MustCompile(`(?m)^func Test[A-Z]\w*\(t \*testing\.T\)`).FindAll(src, -1))
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n != 17 || !strings.Contains(string(readme), "17 tests") {
		t.Fatalf("leases_test.go has %d top-level tests; the contract has 17, and the README must say so", n)
	}
}
