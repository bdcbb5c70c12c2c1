package batch

import (
	"context"
	"errors"
	"testing"
)

// heldSends is a Send that the test holds: every batch shows on sent, and
// waits there for the test to let it answer.
type heldSends struct{ sent chan heldBatch }

type heldBatch struct {
	reqs   []int
	answer chan int // each request is answered by this batch's number
}

func (h heldSends) send(reqs []int) []int {
	b := heldBatch{reqs: reqs, answer: make(chan int)}
	h.sent <- b
	n := <-b.answer
	out := make([]int, len(reqs))
	for i := range out {
		out[i] = n
	}
	return out
}

// A call that joins while a batch is in flight is answered by the next
// batch, sent after it joined, never by the one in flight.
func TestACallJoinsOnlyABatchSentAfterIt(t *testing.T) {
	h := heldSends{sent: make(chan heldBatch)}
	g := &Group[int, int]{Send: h.send}
	first := g.Join(1)
	inflight := <-h.sent // the first batch is sent and held
	second := g.Join(2)  // a call that began while it is in flight
	inflight.answer <- 1
	if got := <-first; got != 1 || len(inflight.reqs) != 1 {
		t.Fatalf("the first call: answered by batch %d of %v; want batch 1 of [1]", got, inflight.reqs)
	}
	var next heldBatch
	select {
	case got := <-second:
		t.Fatalf("a call answered by batch %d, sent before it began", got)
	case next = <-h.sent:
	}
	select {
	case got := <-second:
		t.Fatalf("a call answered by batch %d, sent before it began", got)
	default:
	}
	next.answer <- 2
	if got := <-second; got != 2 || len(next.reqs) != 1 || next.reqs[0] != 2 {
		t.Fatalf("the second call: answered by batch %d of %v; want batch 2 of [2]", got, next.reqs)
	}
}

// Calls that wait together go in one batch: many calls, few sends.
func TestWaitingCallsShareABatch(t *testing.T) {
	h := heldSends{sent: make(chan heldBatch)}
	g := &Group[int, int]{Send: h.send}
	first := g.Join(0)
	inflight := <-h.sent
	var rest []<-chan int
	for i := 1; i <= 10; i++ {
		rest = append(rest, g.Join(i))
	}
	inflight.answer <- 1
	<-first
	next := <-h.sent
	if len(next.reqs) != 10 {
		t.Fatalf("the second batch holds %v; want the 10 calls that waited", next.reqs)
	}
	next.answer <- 2
	for _, c := range rest {
		if got := <-c; got != 2 {
			t.Fatalf("answered by batch %d; want 2", got)
		}
	}
}

// A call whose context ends returns its cause, not an answer.
func TestACallEndsWithItsContext(t *testing.T) {
	h := heldSends{sent: make(chan heldBatch, 1)}
	g := &Group[int, int]{Send: h.send}
	ctx, cancel := context.WithCancelCause(context.Background())
	gone := errors.New("gone")
	cancel(gone)
	if _, err := g.Do(ctx, 1); !errors.Is(err, gone) {
		t.Fatalf("Do after its context ended: %v; want its cause", err)
	}
	(<-h.sent).answer <- 1 // let the sender finish
}

// Gather yields while the calls keep arriving, and no longer than
// gatherYields when they never stop.
func TestGatherYieldsWhileCallsArrive(t *testing.T) {
	tests := []struct {
		name   string
		grows  int // how many of the counts grow
		yields int // the yields Gather should make
	}{
		{"a lone call", 0, 1},
		{"calls that arrive over three yields", 3, 4},
		{"calls that never stop", 1000, gatherYields},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			counts := 0
			Gather(func() int {
				counts++
				if counts-1 <= tt.grows {
					return counts
				}
				return tt.grows + 1
			})
			if yields := counts - 1; yields != tt.yields {
				t.Fatalf("%d yields; want %d", yields, tt.yields)
			}
		})
	}
}
