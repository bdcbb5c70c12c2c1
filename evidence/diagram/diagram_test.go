package diagram

import "testing"

func TestSequence(t *testing.T) {
	got := Sequence(
		[]Participant{{"A", "worker A"}, {"R", "receiver (fenced)"}},
		[]Line{
			Call("A", "R", `write epoch 1 "v;#1"`),
			Answer("R", "A", "stale"),
			Note("A", "exits\nnow"),
		})
	want := `sequenceDiagram
    participant A as worker A
    participant R as receiver (fenced)
    A->>R: write epoch 1 "v#59;#35;1"
    R-->>A: stale
    Note over A: exits now
`
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}
