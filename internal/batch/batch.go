// Package batch sends calls that wait at the same time as one request
// (group commit): a call joins the next batch, which is sent as soon as
// none is in flight, and only a batch taken after the call joined
// answers it. A lease's renewal may be answered by a request sent later
// than the renewal began (the lease then lasts longer), never by one
// sent earlier (its holder would count on time the store never gave).
package batch

import (
	"context"
	"runtime"
	"sync"
)

// Group batches the calls of one kind. The zero value is not usable: set
// Send. Safe for concurrent use.
type Group[Req, Ans any] struct {
	// Send sends one batch and returns one answer per request, in order.
	Send func(reqs []Req) []Ans

	mu      sync.Mutex
	waiting []call[Req, Ans]
	sending bool
}

type call[Req, Ans any] struct {
	req    Req
	answer chan Ans
}

// Do joins the next batch with req and returns its answer, or the cause
// of ctx's end (the batch may have been sent, or not).
func (g *Group[Req, Ans]) Do(ctx context.Context, req Req) (Ans, error) {
	answer := g.Join(req)
	select {
	case a := <-answer:
		return a, nil
	case <-ctx.Done():
		var none Ans
		return none, context.Cause(ctx)
	}
}

// Join puts req in the next batch, which is sent at once when none is in
// flight, and returns where its answer comes.
func (g *Group[Req, Ans]) Join(req Req) <-chan Ans {
	c := call[Req, Ans]{req: req, answer: make(chan Ans, 1)}
	g.mu.Lock()
	g.waiting = append(g.waiting, c)
	start := !g.sending
	g.sending = true
	g.mu.Unlock()
	if start {
		go g.send()
	}
	return c.answer
}

// send sends batches while calls wait: each the calls that were waiting
// when it was taken, so that a call that joins while one is in flight
// goes in the next.
func (g *Group[Req, Ans]) send() {
	Gather(func() int {
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(g.waiting)
	})
	for {
		g.mu.Lock()
		calls := g.waiting
		g.waiting = nil
		if len(calls) == 0 {
			g.sending = false
			g.mu.Unlock()
			return
		}
		g.mu.Unlock()
		reqs := make([]Req, len(calls))
		for i, c := range calls {
			reqs[i] = c.req
		}
		answers := g.Send(reqs)
		for i, c := range calls {
			c.answer <- answers[i]
		}
	}
}

// gatherYields bounds the yields of Gather: calls that keep arriving (a
// steady stream of grants) must not hold the first batch back for long.
const gatherYields = 32

// Gather lets the calls that arrive together join the first batch before
// it is taken: the renewals of a process's sessions, woken on one beat,
// are runnable at once, but the sender started by the first of them may
// run before the others; then that batch carries one call, and the rest
// wait for its answer and go in a second. So Gather yields the processor
// while the number of waiting calls (waiting) still grows from one yield
// to the next, at most gatherYields times. Yields, not a wait: nothing is
// held back once the calls stop arriving, and a lone call costs one
// yield.
func Gather(waiting func() int) {
	n := waiting()
	for range gatherYields {
		runtime.Gosched()
		m := waiting()
		if m == n {
			return
		}
		n = m
	}
}
