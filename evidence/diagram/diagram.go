// Package diagram renders a run as a Mermaid sequence diagram, the kind
// GitHub draws from a fenced ```mermaid block. The scenarios and the
// explorer turn their own steps into Lines; this package only knows how
// to write them, so the same run always gives the same bytes.
//
// Part of the evidence (what cmd/run-experiment reruns), not of the
// library: no API promise.
package diagram

import (
	"fmt"
	"strings"
)

// Participant is one lifeline: ID is what Lines refer to, Label what the
// picture shows.
type Participant struct {
	ID, Label string
}

// Line is one arrow or one note. An arrow goes From one participant To
// another; a reply is drawn dashed. A note (To empty) stands over From.
type Line struct {
	From, To string
	Text     string
	Reply    bool
}

// Note is a note over one participant.
func Note(over, text string) Line { return Line{From: over, Text: text} }

// Call is a request from one participant to another.
func Call(from, to, text string) Line { return Line{From: from, To: to, Text: text} }

// Answer is a reply from one participant to another.
func Answer(from, to, text string) Line { return Line{From: from, To: to, Text: text, Reply: true} }

// Sequence renders the diagram: the participants in the order given, then
// every line. It ends with a newline, and holds no fence markers.
func Sequence(participants []Participant, lines []Line) string {
	var b strings.Builder
	b.WriteString("sequenceDiagram\n")
	for _, p := range participants {
		fmt.Fprintf(&b, "    participant %s as %s\n", p.ID, escape(p.Label))
	}
	for _, l := range lines {
		switch {
		case l.To == "":
			fmt.Fprintf(&b, "    Note over %s: %s\n", l.From, escape(l.Text))
		case l.Reply:
			fmt.Fprintf(&b, "    %s-->>%s: %s\n", l.From, l.To, escape(l.Text))
		default:
			fmt.Fprintf(&b, "    %s->>%s: %s\n", l.From, l.To, escape(l.Text))
		}
	}
	return b.String()
}

// escape keeps a text on its one line and away from Mermaid's syntax: a
// semicolon or a '#' would end or change the statement, so they become
// Mermaid's entity codes.
func escape(s string) string {
	return strings.NewReplacer("\n", " ", ";", "#59;", "#", "#35;").Replace(s)
}
