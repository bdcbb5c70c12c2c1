package docs_test

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"leases/evidence/report"
	"leases/evidence/results"
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

// codeMarker finds the code blocks of a document, as the run draws them:
// `<!-- generated: code PATH NAME -->`.
var codeMarker = regexp.MustCompile(`(?m)^<!-- generated: code (\S+) (\S+) -->$`)

// Every code block shows its imports, in its doc comment (the block is
// the declaration alone): an import block listing exactly the packages
// the declaration names, as its file imports them, so that a reader can
// copy both.
func TestCodeBlocksShowTheirImports(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := 0
	for _, doc := range append([]string{filepath.Join(root, "README.md")}, paths...) {
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range codeMarker.FindAllStringSubmatch(string(text), -1) {
			blocks++
			shown, used, err := imports(filepath.Join(root, filepath.FromSlash(m[1])), m[2])
			if err != nil {
				t.Fatalf("%s: %s %s: %v", doc, m[1], m[2], err)
			}
			if !slices.Equal(shown, used) {
				t.Errorf("%s: %s of %s shows the imports %q; it uses %q", doc, m[2], m[1], shown, used)
			}
		}
	}
	if blocks == 0 {
		t.Fatal("no code block found: the marker changed?")
	}
}

// imports are the imports the doc comment of the function name in the Go
// file at path shows, and those its body uses (each as its file imports
// it, with its name where it has one), both sorted.
func imports(path, name string) (shown, used []string, err error) {
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
	if err != nil {
		return nil, nil, err
	}
	var fn *ast.FuncDecl
	for _, d := range file.Decls {
		if f, ok := d.(*ast.FuncDecl); ok && f.Recv == nil && f.Name.Name == name {
			fn = f
		}
	}
	if fn == nil || fn.Doc == nil {
		return nil, nil, fmt.Errorf("no function %s with a doc comment", name)
	}
	_, block, ok := strings.Cut(fn.Doc.Text(), "\timport (\n")
	if !ok {
		return nil, nil, fmt.Errorf("the doc comment of %s shows no import block", name)
	}
	block, _, _ = strings.Cut(block, "\t)")
	for _, line := range strings.Split(block, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			shown = append(shown, line)
		}
	}
	byName := map[string]string{}
	for _, spec := range file.Imports {
		p, err := strconv.Unquote(spec.Path.Value)
		if err != nil {
			return nil, nil, err
		}
		if spec.Name != nil {
			byName[spec.Name.Name] = spec.Name.Name + " " + spec.Path.Value
			continue
		}
		byName[packageName(p)] = spec.Path.Value
	}
	ast.Inspect(fn, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok && byName[id.Name] != "" && !slices.Contains(used, byName[id.Name]) {
				used = append(used, byName[id.Name])
			}
		}
		return true
	})
	slices.Sort(shown)
	slices.Sort(used)
	return shown, used, nil
}

// packageName is the name a package of import path p has by convention:
// its last element, or the one before a major version (pgx/v5: pgx).
func packageName(p string) string {
	parts := strings.Split(p, "/")
	last := parts[len(parts)-1]
	if len(parts) > 1 && regexp.MustCompile(`^v[0-9]+$`).MatchString(last) {
		return parts[len(parts)-2]
	}
	return last
}

// The README stays short (issue 21: at most 200 lines): the rest is in
// docs/.
func TestReadmeIsShort(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(string(data), "\n"); lines > 200 {
		t.Fatalf("README.md has %d lines; keep it at 200 at most, and move the rest to docs/", lines)
	}
}
