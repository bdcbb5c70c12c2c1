package report

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// codeMarker finds the code blocks of a document: `<!-- generated: code
// PATH NAME -->` shows the declaration NAME (a function, a type) of the Go
// file PATH, relative to the repository's root. Such a file is a test
// file whose examples run the declaration, so that what a document shows
// is code that go test compiles and runs.
var codeMarker = regexp.MustCompile(`(?m)^<!-- generated: (code (\S+) (\S+)) -->$`)

// CodeBlocks returns the code block of every code marker in texts, by
// name, read from the files under root.
func CodeBlocks(root string, texts ...string) (map[string]string, error) {
	blocks := map[string]string{}
	for _, text := range texts {
		for _, m := range codeMarker.FindAllStringSubmatch(text, -1) {
			source, err := declaration(filepath.Join(root, filepath.FromSlash(m[2])), m[3])
			if err != nil {
				return nil, err
			}
			blocks[m[1]] = source
		}
	}
	return blocks, nil
}

// declaration is the source of the top-level declaration name in the Go
// file at path, with its doc comment, ending in a newline.
func declaration(path, name string) (string, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, path, src, parser.ParseComments)
	if err != nil {
		return "", err
	}
	for _, decl := range file.Decls {
		var doc *ast.CommentGroup
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if d.Recv != nil || d.Name.Name != name {
				continue
			}
			doc = d.Doc
		case *ast.GenDecl:
			if !declares(d, name) {
				continue
			}
			doc = d.Doc
		default:
			continue
		}
		start := decl.Pos()
		if doc != nil {
			start = doc.Pos()
		}
		return string(src[fset.Position(start).Offset:fset.Position(decl.End()).Offset]) + "\n", nil
	}
	return "", fmt.Errorf("%s declares no %s", path, name)
}

func declares(d *ast.GenDecl, name string) bool {
	for _, spec := range d.Specs {
		switch s := spec.(type) {
		case *ast.TypeSpec:
			if s.Name.Name == name {
				return true
			}
		case *ast.ValueSpec:
			for _, n := range s.Names {
				if n.Name == name {
					return true
				}
			}
		}
	}
	return false
}

// LooseGo returns the line numbers of the ```go fences in text that are
// not a code block's: Go that no test compiles.
func LooseGo(text string) []int {
	var loose []int
	inBlock := false
	for i, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, openMarker+"code "):
			inBlock = true
		case trimmed == closeMarker:
			inBlock = false
		case trimmed == "```go" && !inBlock:
			loose = append(loose, i+1)
		}
	}
	return loose
}
