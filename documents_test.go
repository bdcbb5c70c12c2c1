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

	"leases/internal/experiment/report"
	"leases/internal/experiment/results"
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
	var texts []string
	for _, path := range documents(t) {
		text, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		texts = append(texts, string(text))
		if loose := report.LooseGo(string(text)); len(loose) > 0 {
			t.Errorf("%s: Go at lines %v is not a generated code block: no test compiles it", path, loose)
		}
	}
	code, err := report.CodeBlocks(".", texts...)
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for name := range code {
		used[name] = true
	}
	maps.Copy(blocks, code)
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

// The layout in docs/contract.md names every package of the repository,
// in every module: a package added or moved without it fails here.
func TestLayoutNamesEveryPackage(t *testing.T) {
	doc, err := os.ReadFile("docs/contract.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, _ := strings.Cut(string(doc), "## Layout\n")
	tree, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimSpace(after), "```"), "```")
	named := map[string]bool{}
	for _, line := range strings.Split(tree, "\n") {
		// A line is "├── name/   what it holds", indented by its depth.
		if field := strings.Fields(strings.TrimLeft(line, "│├└─ ")); len(field) > 0 {
			named[field[0]] = true
		}
	}
	err = filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() || path == "." {
			return err
		}
		if strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "docs" {
			return filepath.SkipDir
		}
		sources, err := filepath.Glob(filepath.Join(path, "*.go"))
		if err != nil || len(sources) == 0 {
			return err
		}
		if !named[d.Name()+"/"] && !named[filepath.ToSlash(path)+"/"] {
			t.Errorf("package %s is not in the layout of docs/contract.md", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
