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
// each, most of it the packages' init, most of a worker's cost), and
// starts the next in the background, while the scenario runs. A worker
// that exits (Exit) ends its session and closes its store, and its
// process goes back to the pool, to serve the next scenario: one
// scenario at a time, each on a store it opens itself, none of an earlier
// one's state left in it but the process. Its two workers are always two
// processes: a process serves one Worker at a time.
type Pool struct {
	ctx   context.Context
	ready chan standby // pushed only under mu, never blocking
	wg    sync.WaitGroup
	mu    sync.Mutex
	shut  bool
	// spawning counts the starts under way; started, every process the
	// pool started (Started).
	spawning, started int
}

// poolIdle bounds the processes a pool keeps in standby: more, given
// back, are ended.
const poolIdle = 8

// standby is one process the pool started, or why it could not.
type standby struct {
	w   *Worker
	err error
}

// NewPool starts size workers in standby, bounded by ctx (which also
// bounds every later spawn), and starts another whenever a Start takes
// the last; Close ends those in standby.
func NewPool(ctx context.Context, size int) *Pool {
	p := &Pool{ctx: ctx, ready: make(chan standby, poolIdle)}
	p.mu.Lock()
	defer p.mu.Unlock()
	for range size {
		p.spawn()
	}
	return p
}

// Started is how many processes the pool has started.
func (p *Pool) Started() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.started
}

// spawn starts one worker in standby in the background; p.mu is held.
func (p *Pool) spawn() {
	if p.shut {
		return
	}
	p.spawning++
	p.started++
	p.wg.Go(func() {
		w, err := startStandby(p.ctx)
		p.mu.Lock()
		defer p.mu.Unlock()
		p.spawning--
		p.put(standby{w, err})
	})
}

// refill starts a process in standby when none is ready or on its way:
// the processes that workers give back serve most Starts, and each start
// costs tens of milliseconds of CPU.
func (p *Pool) refill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.ready)+p.spawning == 0 {
		p.spawn()
	}
}

// put keeps s for a later Start, or ends its process if the pool is
// closed or full; p.mu is held.
func (p *Pool) put(s standby) {
	if !p.shut {
		select {
		case p.ready <- s:
			return
		default:
		}
	}
	if s.w != nil {
		s.w.Kill()
	}
}

// takeBack asks w's process to leave its assignment, which it answers
// once its session has ended and its store is closed, and keeps the
// process in standby for a later Start; w does nothing more. A process
// that fails to leave is killed.
func (p *Pool) takeBack(ctx context.Context, w *Worker) error {
	if _, err := w.call(ctx, request{Op: opLeave}); err != nil {
		w.Kill()
		return err
	}
	w.left.Store(true)
	back := &Worker{process: w.process, name: "in standby", pid: w.pid}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.put(standby{w: back})
	return nil
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
	p.refill()
	if s.err != nil {
		return nil, fmt.Errorf("start worker %s: %w", name, s.err)
	}
	w := s.w
	w.name, w.pool = name, p
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

// Close ends the workers in standby, once every spawn has finished. A
// spawn that failed is no failure of the run unless a Start was handed
// it. Workers handed out are their scenario's to end: one that exits
// after Close is ended then.
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
