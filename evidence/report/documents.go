package report

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"leases/evidence/results"
)

// The markers around a generated block in a Markdown document.
const (
	openMarker  = "<!-- generated: "
	closeMarker = "<!-- end -->"
)

// Rewrite returns text with every generated block replaced by what blocks
// holds under its name, and the names it found. A block is a line
// `<!-- generated: NAME -->`, the block, and a line `<!-- end -->`; a
// diagram sits in a ```mermaid fence, which GitHub draws. A name that
// blocks does not have, or a block with no end, is an error: a document
// must not show a picture or a figure that no run made.
func Rewrite(text string, blocks map[string]string) (string, []string, error) {
	var out strings.Builder
	var names []string
	lines := strings.SplitAfter(text, "\n")
	for i := 0; i < len(lines); i++ {
		out.WriteString(lines[i])
		name, ok := strings.CutPrefix(strings.TrimSpace(lines[i]), openMarker)
		if !ok {
			continue
		}
		name = strings.TrimSuffix(name, " -->")
		block, known := blocks[name]
		if !known {
			return "", nil, fmt.Errorf("line %d: no run makes a block called %q", i+1, name)
		}
		end := i + 1
		for end < len(lines) && strings.TrimSpace(lines[end]) != closeMarker {
			end++
		}
		if end == len(lines) {
			return "", nil, fmt.Errorf("line %d: block %q has no %s", i+1, name, closeMarker)
		}
		switch {
		case strings.HasPrefix(name, "diagram "):
			block = "```mermaid\n" + block + "```\n"
		case strings.HasPrefix(name, "code "):
			block = "```go\n" + block + "```\n"
		}
		out.WriteString(block)
		out.WriteString(lines[end])
		names = append(names, name)
		i = end
	}
	return out.String(), names, nil
}

// Document is one Markdown document of the repository: its text as it is,
// and as the run draws it.
type Document struct {
	// Path is relative to the repository's root.
	Path string
	// Text is the document as it is; Drawn is the same with every
	// generated block drawn again.
	Text, Drawn string
}

// Documents reads the repository's documents under root (README.md and
// docs/*.md) and draws every generated block of each again: the
// pictures and tables from doc, the code from the Go sources under root.
// unused names the blocks doc makes that no document shows. A document
// with Go outside a code block, or a block no run or source makes, is an
// error: a document must not show what no test compiles, or a picture no
// run made.
func Documents(root string, doc *results.Results) (documents []Document, unused []string, err error) {
	paths, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, nil, err
	}
	paths = append([]string{filepath.Join(root, "README.md")}, paths...)
	var texts []string
	for _, path := range paths {
		// A FIFO would block the read, and a link would be replaced by
		// a file when the document is written: documents are files.
		if info, err := os.Lstat(path); err != nil || !info.Mode().IsRegular() {
			return nil, nil, fmt.Errorf("%s is not a regular file (%v)", path, err)
		}
		text, err := os.ReadFile(path)
		if err != nil {
			return nil, nil, err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return nil, nil, err
		}
		if loose := LooseGo(string(text)); len(loose) > 0 {
			return nil, nil, fmt.Errorf("%s: Go at lines %v is not a generated code block: no test compiles it", rel, loose)
		}
		texts = append(texts, string(text))
		documents = append(documents, Document{Path: filepath.ToSlash(rel), Text: string(text)})
	}
	blocks, err := Blocks(doc)
	if err != nil {
		return nil, nil, err
	}
	code, err := CodeBlocks(root, texts...)
	if err != nil {
		return nil, nil, err
	}
	maps.Copy(blocks, code)
	used := map[string]bool{}
	for i := range documents {
		drawn, names, err := Rewrite(documents[i].Text, blocks)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", documents[i].Path, err)
		}
		documents[i].Drawn = drawn
		for _, name := range names {
			used[name] = true
		}
	}
	for _, name := range slices.Sorted(maps.Keys(blocks)) {
		if !used[name] {
			unused = append(unused, name)
		}
	}
	return documents, unused, nil
}
