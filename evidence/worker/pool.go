package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
)

// Pool keeps worker processes started ahead of need, in standby: a
// process that has started and announced itself but opened no store yet.
// Pool.Start hands one its sandbox, so that a scenario waits for a store
// to open, not for this binary to start (tens of milliseconds of CPU
// each, most of a scenario's time on SQLite), and starts the next in the
// background, while the scenario runs. Each worker still serves one
// scenario only and is as fresh as one Start makes: nothing of an earlier
// scenario is in it.
type Pool struct {
	ctx   context.Context
	ready chan standby // never more than its capacity: one per spawn
	wg    sync.WaitGroup
	mu    sync.Mutex
	shut  bool
}

// standby is one process the pool started, or why it could not.
type standby struct {
	w   *Worker
	err error
}

// NewPool starts size workers in standby, bounded by ctx (which also
// bounds every later spawn); Close ends those never handed out.
func NewPool(ctx context.Context, size int) *Pool {
	p := &Pool{ctx: ctx, ready: make(chan standby, size)}
	for range size {
		p.spawn()
	}
	return p
}

// spawn starts one worker in standby in the background.
func (p *Pool) spawn() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shut {
		return
	}
	p.wg.Go(func() {
		w, err := startStandby(p.ctx)
		p.ready <- standby{w, err}
	})
}

func startStandby(ctx context.Context) (*Worker, error) {
	cmd, err := command(standbyArg)
	if err != nil {
		return nil, err
	}
	w, err := spawn(ctx, cmd, Options{})
	if err != nil {
		return nil, err
	}
	w.name = "in standby"
	if err := w.hello(ctx); err != nil {
		return nil, err
	}
	return w, nil
}

// Start is Start with a worker of the pool. Options a standby cannot take
// (Env, GroupOnly: they are the process's own from its start) make it a
// plain Start.
func (p *Pool) Start(ctx context.Context, name string, opts Options) (*Worker, error) {
	if len(opts.Env) > 0 || opts.GroupOnly {
		return Start(ctx, name, opts)
	}
	var s standby
	select {
	case <-ctx.Done():
		return nil, fmt.Errorf("start worker %s: %w", name, context.Cause(ctx))
	case s = <-p.ready:
	}
	p.spawn()
	if s.err != nil {
		return nil, fmt.Errorf("start worker %s: %w", name, s.err)
	}
	w := s.w
	w.name = name
	if opts.Started != nil {
		opts.Started(w.pid)
	}
	if err := w.assign(ctx, opts.Backend, opts.Address); err != nil {
		return nil, fmt.Errorf("start worker %s: %w", name, err)
	}
	return w, nil
}

// assign hands a worker in standby its backend and sandbox, and waits,
// bounded by ctx, for it to announce itself again, its store open.
func (w *Worker) assign(ctx context.Context, backendName, address string) error {
	line, err := json.Marshal(assignment{Backend: backendName, Address: address})
	if err == nil {
		_, err = w.stdin.Write(append(line, '\n'))
	}
	if err != nil {
		w.Kill()
		return err
	}
	return w.hello(ctx)
}

// Close ends the workers in standby that were never handed out, once
// every spawn has finished. A spawn that failed is no failure of the run
// unless a Start was handed it. Workers handed out are their scenario's
// to end.
func (p *Pool) Close() {
	p.mu.Lock()
	p.shut = true
	p.mu.Unlock()
	p.wg.Wait()
	for {
		select {
		case s := <-p.ready:
			if s.w != nil {
				s.w.Kill()
			}
		default:
			return
		}
	}
}

// StartTool is StartTool with a process of the pool.
func (p *Pool) StartTool(ctx context.Context, name, path string, opts Options) (*Worker, error) {
	opts.Backend, opts.Address = toolArg, path
	w, err := p.Start(ctx, name, opts)
	if err != nil {
		return nil, fmt.Errorf("start tool %s: %w", name, err)
	}
	return w, nil
}
