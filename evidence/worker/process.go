package worker

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"leases/internal/roles"
	"os"
	"os/exec"
	"sync/atomic"
)

// Worker is the controller's end of one worker: a child process of this
// very binary, driven one JSON line at a time over its stdin and stdout.
// A worker of a Pool is one assignment of a process the pool keeps: once
// it has exited (Exit), the process may serve another Worker, and this
// one does nothing more.
type Worker struct {
	*process
	name    string
	pid     int
	address string // the tool server's (StartTool)
	pool    *Pool  // the pool the process goes back to on Exit
	// left is set once the process went back to its pool: the process is
	// no longer this Worker's to use, signal or kill.
	left atomic.Bool
}

// process is a worker's child process and the controller's pipes to it.
type process struct {
	cmd     *exec.Cmd
	stdin   *os.File
	replies chan replyLine
	stderr  tailBuffer
	exited  chan struct{} // closed once the process has been waited for
	// waitErr is why waiting for the process failed, leaving its exit
	// status unknown (cmd.ProcessState nil); set before exited is closed.
	waitErr error
}

// errLeft is what a Worker that went back to its pool answers.
func (w *Worker) errLeft() error {
	return fmt.Errorf("worker %s has exited", w.name)
}

type replyLine struct {
	line []byte
	err  error // set once stdout ends
}

// Options say where a worker works and what the controller learns.
type Options struct {
	// Backend is the name of the backend (backend.Driver) the worker opens
	// its store with; Address is where the sandbox is (backend.Sandbox.Address).
	Backend, Address string
	// Started, when set, learns the pid as soon as the process exists,
	// before the worker has said anything.
	Started func(pid int)
	// Env adds KEY=value entries to the worker's environment.
	Env []string
	// GroupOnly leaves out what Linux adds to end a worker whose
	// controller died (the parent-death signal), keeping what every Unix
	// has (a process group of the worker's own; see endsWithController):
	// a test sets it to show on Linux that the group alone suffices, as
	// it must on macOS. It changes nothing elsewhere.
	GroupOnly bool
}

// Start re-executes this binary in the worker role, named name, and waits,
// bounded by ctx, for it to announce its pid. The binary must have
// registered the role (Register) and called roles.Run.
func Start(ctx context.Context, name string, opts Options) (*Worker, error) {
	w, err := start(ctx, name, opts)
	if err != nil {
		return nil, fmt.Errorf("start worker %s: %w", name, err)
	}
	return w, nil
}

func start(ctx context.Context, name string, opts Options) (*Worker, error) {
	cmd, err := command(opts.Backend, opts.Address)
	if err != nil {
		return nil, err
	}
	w, err := spawn(ctx, cmd, opts)
	if err != nil {
		return nil, err
	}
	w.name = name
	if err := w.hello(ctx); err != nil {
		return nil, err
	}
	return w, nil
}

// spawn starts cmd, a worker (or a worker in standby) whose input and
// output are the controller's pipes. The Started callback learns its pid
// at once.
func spawn(ctx context.Context, cmd *exec.Cmd, opts Options) (*Worker, error) {
	// Plain pipes rather than cmd.StdoutPipe: Wait must not close the
	// reader while the reader goroutine still uses it.
	childIn, stdin, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	stdout, childOut, err := os.Pipe()
	if err != nil {
		return nil, errors.Join(err, childIn.Close(), stdin.Close())
	}
	w := &Worker{process: &process{stdin: stdin, replies: make(chan replyLine, 1), exited: make(chan struct{})}}
	w.cmd = cmd
	w.cmd.Env = append(w.cmd.Env, opts.Env...)
	w.cmd.Stdin, w.cmd.Stdout, w.cmd.Stderr = childIn, childOut, &w.stderr
	// A worker exits when its input ends; one stopped with SIGSTOP cannot
	// see that, and the system must end it when its controller dies.
	w.cmd.SysProcAttr = endsWithController(opts.GroupOnly)
	err = w.cmd.Start()
	// The child has its own copies now; the controller must drop its
	// copies, or the child's stdout would never reach end-of-file.
	closeErr := errors.Join(childIn.Close(), childOut.Close())
	if err != nil {
		return nil, errors.Join(err, stdin.Close(), stdout.Close())
	}
	if opts.Started != nil {
		opts.Started(w.cmd.Process.Pid)
	}
	go w.readReplies(stdout)
	go w.wait()
	if closeErr != nil {
		w.Kill()
		return nil, closeErr
	}
	return w, nil
}

// hello waits, bounded by ctx, for the worker to announce its pid (a
// worker does once it has opened its store), and kills it if it does not.
func (w *Worker) hello(ctx context.Context) error {
	hello, err := w.receive(ctx)
	if err == nil && hello.PID != w.cmd.Process.Pid {
		err = fmt.Errorf("it says pid %d, the child is %d", hello.PID, w.cmd.Process.Pid)
	}
	if err != nil {
		w.Kill()
		return err
	}
	w.pid, w.address = hello.PID, hello.Address
	return nil
}

// wait waits for the process to end and closes exited. When waiting fails
// (waitid itself failed), how the process ended is unknown and it may not
// even have ended: it is killed, so that no worker outlives a controller
// that lost track of it, and reaped if a second wait succeeds.
func (w *Worker) wait() {
	defer close(w.exited)
	err := w.cmd.Wait()
	if w.cmd.ProcessState != nil {
		return // it ended; a non-zero status is read from ProcessState
	}
	w.waitErr = err
	_ = w.cmd.Process.Kill()
	_, _ = w.cmd.Process.Wait()
}

// ended describes how the process ended; call it once exited is closed.
func (w *Worker) ended() string {
	if w.waitErr != nil {
		return "exit status unknown: " + w.waitErr.Error()
	}
	return w.cmd.ProcessState.String()
}

func (w *Worker) readReplies(stdout *os.File) {
	defer stdout.Close()
	lines := bufio.NewScanner(stdout)
	lines.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for lines.Scan() {
		w.replies <- replyLine{line: append([]byte(nil), lines.Bytes()...)}
	}
	err := lines.Err()
	if err == nil {
		err = errors.New("worker closed its output")
	}
	w.replies <- replyLine{err: err}
	close(w.replies)
}

// call sends one request and waits, bounded by ctx, for its reply.
func (w *Worker) call(ctx context.Context, req request) (reply, error) {
	if _, err := w.send(req); err != nil {
		return reply{}, err
	}
	return w.receive(ctx)
}

func (w *Worker) receive(ctx context.Context) (reply, error) {
	select {
	case <-ctx.Done():
		return reply{}, fmt.Errorf("worker %s did not answer: %w%s", w.name, context.Cause(ctx), w.stderr.saying())
	case got, ok := <-w.replies:
		if !ok || got.err != nil {
			// The process is gone or going; wait (bounded) for it so
			// that its exit status and last words are known.
			select {
			case <-ctx.Done():
				return reply{}, fmt.Errorf("worker %s closed its output but did not exit: %w%s", w.name, context.Cause(ctx), w.stderr.saying())
			case <-w.exited:
			}
			return reply{}, fmt.Errorf("worker %s ended unexpectedly (%s)%s", w.name, w.ended(), w.stderr.saying())
		}
		var r reply
		if err := json.Unmarshal(got.line, &r); err != nil {
			return reply{}, fmt.Errorf("garbled reply from worker %s: %w", w.name, err)
		}
		if r.Error != "" {
			return r, fmt.Errorf("worker %s: %w", w.name, remoteError{msg: r.Error, sentinels: r.Sentinels})
		}
		if r.Paused != "" {
			return r, fmt.Errorf("worker %s: %w at %s", w.name, ErrPausedInsideTransaction, r.Paused)
		}
		return r, nil
	}
}

// Exit asks the worker to exit and waits, bounded by ctx, until it has.
// A worker of a Pool ends its session and closes its store, and its
// process goes back to the pool.
func (w *Worker) Exit(ctx context.Context) error {
	if w.left.Load() {
		return w.errLeft()
	}
	if w.pool != nil {
		return w.pool.takeBack(ctx, w)
	}
	if _, err := w.call(ctx, request{Op: opExit}); err != nil {
		return err
	}
	if err := w.Abandon(ctx); err != nil {
		return err
	}
	if w.waitErr != nil {
		return fmt.Errorf("worker %s: cannot learn its exit status: %w", w.name, w.waitErr)
	}
	if !w.cmd.ProcessState.Success() {
		return fmt.Errorf("worker %s exited with %v%s", w.name, w.cmd.ProcessState, w.stderr.saying())
	}
	return nil
}

// Abandon closes the worker's input, as a controller that dies does (a
// worker takes it as the order to exit), and waits, bounded by ctx, until
// the worker has exited on its own.
func (w *Worker) Abandon(ctx context.Context) error {
	if w.left.Load() {
		return nil
	}
	_ = w.stdin.Close()
	select {
	case <-ctx.Done():
		return fmt.Errorf("worker %s did not exit after its input closed: %w%s", w.name, context.Cause(ctx), w.stderr.saying())
	case <-w.exited:
	}
	go w.discardReplies()
	return nil
}

// Kill ends the worker at once, whatever it is doing, and reaps it; a
// worker that went back to its pool is no longer its to end.
func (w *Worker) Kill() {
	if w.left.Load() {
		return
	}
	_ = w.stdin.Close()
	_ = w.cmd.Process.Kill()
	<-w.exited
	go w.discardReplies()
}

// discardReplies lets the reader goroutine finish once nobody listens.
func (w *Worker) discardReplies() {
	for range w.replies {
	}
}

// tailBuffer keeps the last few KiB a worker wrote to stderr, to quote its
// last line in an error when the worker dies.
type tailBuffer struct{ roles.Tail }

// saying quotes the last non-empty line the worker wrote on stderr, where
// a worker says why it exits.
func (t *tailBuffer) saying() string {
	if line := t.LastLine(); line != "" {
		return "; it said: " + line
	}
	return ""
}
