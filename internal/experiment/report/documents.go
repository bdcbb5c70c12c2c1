package report

import (
	"fmt"
	"strings"
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
