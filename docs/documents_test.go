package docs_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"leases/internal/experiment/report"
	"leases/internal/experiment/results"
)

// root is the repository's root, from this package's directory.
const root = ".."

// The documents show the run and the code: every generated block is what
// results.json or the Go sources make of it, no Go is outside such a
// block, and every picture the run makes is in some document. After a
// change, the command draws them again:
//
//	go run ./cmd/run-experiment --check results.json --output reproduced.json --docs .
func TestDocumentsShowTheRun(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc results.Results
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	documents, unused, err := report.Documents(root, &doc)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range documents {
		if d.Drawn != d.Text {
			t.Errorf("%s: a generated block differs from what results.json and the sources make of it, first at line %d; "+
				"draw it again with run-experiment --docs", d.Path, firstDifferingLine(d.Text, d.Drawn))
		}
	}
	for _, name := range unused {
		t.Errorf("no document shows the block %q", name)
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
	src, err := os.ReadFile(filepath.Join(root, "leases_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	n := len(regexp.MustCompile(`(?m)^func Test[A-Z]\w*\(t \*testing\.T\)`).FindAll(src, -1))
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
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
	doc, err := os.ReadFile("contract.md")
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
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() || path == root {
			return err
		}
		if strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" {
			return filepath.SkipDir
		}
		sources, err := filepath.Glob(filepath.Join(path, "*.go"))
		if err != nil || len(sources) == 0 {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		if !named[d.Name()+"/"] && !named[filepath.ToSlash(rel)+"/"] {
			t.Errorf("package %s is not in the layout of docs/contract.md", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
