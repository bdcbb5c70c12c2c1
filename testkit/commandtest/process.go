// Package commandtest is what the tests of the operators' command leases
// share: cmd/leases's, whose test binary plays the command, and
// tests/leasescmd's, which build it. The command runs as a process of the
// test's own (Start): its input a pipe that the test closes, its output
// read line by line as it comes (a line is the handshake by which the
// test knows where the command is), its end waited for within the test's
// bound (package testctx); a command still running when the test ends is
// killed. The CMDs that leases run starts under a lease are the test
// binary itself, re-executed to play one (CMD, PlayCMD).
//
// A test kit: used by tests only, never by shipped code (the library, the
// evidence as cmd/run-experiment links it, the commands).
package commandtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"leases/testkit/testctx"
)

// Result is how a command ended.
type Result struct {
	// Code is the exit status; -1 when the process could not be waited
	// for.
	Code           int
	Stdout, Stderr string
}

func (r Result) String() string {
	return fmt.Sprintf("exit %d, stdout %q, stderr %q", r.Code, r.Stdout, r.Stderr)
}

// Process is a command running as a process of its own.
type Process struct {
	// Cmd is the process; Stdin its input, for the test to write and
	// close; Stdout and Stderr its output, line by line.
	Cmd            *exec.Cmd
	Stdin          io.WriteCloser
	Stdout, Stderr *Lines

	t    *testing.T
	ctx  context.Context
	done chan struct{}
	res  Result
}

// Start starts cmd (whose Stdin, Stdout and Stderr must be unset) as a
// process of t's. Its input is a pipe that only the test closes (not
// StdinPipe's, which Wait closes), so that what it runs can hold until
// the test says; it is killed when t ends, if it still runs.
func Start(t *testing.T, cmd *exec.Cmd) *Process {
	t.Helper()
	p := &Process{Cmd: cmd, t: t, ctx: testctx.Context(t), done: make(chan struct{})}
	stdin, writeEnd, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdin, p.Stdin = stdin, writeEnd
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	err = cmd.Start()
	_ = stdin.Close()
	if err != nil {
		_ = writeEnd.Close()
		t.Fatal(err)
	}
	p.Stdout, p.Stderr = readLines(stdout), readLines(stderr)
	go p.reap()
	t.Cleanup(func() {
		_ = p.Stdin.Close()
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill() // what it started dies with it, or by the test's own cleanup
		}
	})
	return p
}

// Run runs cmd to its end with its input closed, and returns how it
// ended.
func Run(t *testing.T, cmd *exec.Cmd) Result {
	t.Helper()
	p := Start(t, cmd)
	if err := p.Stdin.Close(); err != nil {
		t.Fatal(err)
	}
	return p.Wait()
}

// reap waits for both output streams to end and for the process to
// exit, then records how it ended.
func (p *Process) reap() {
	defer close(p.done)
	<-p.Stdout.closed
	<-p.Stderr.closed
	err := p.Cmd.Wait()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		p.res.Code = -1
	} else {
		p.res.Code = p.Cmd.ProcessState.ExitCode()
	}
	p.res.Stdout, p.res.Stderr = p.Stdout.All(), p.Stderr.All()
}

// Wait waits for the command to exit, and for every process that holds
// its output, and returns how it ended. A command that has not ended by
// the test's bound fails the test, with what it said.
func (p *Process) Wait() Result {
	p.t.Helper()
	select {
	case <-p.done:
		return p.res
	case <-p.ctx.Done():
		// Something still holds its output, or it hangs: fail now (the
		// cleanup kills it).
		p.t.Fatalf("the command did not end (%v): stdout %q, stderr %q", context.Cause(p.ctx), p.Stdout.All(), p.Stderr.All())
		return Result{}
	}
}

// Expect waits for a line of stream (p.Stdout or p.Stderr) that contains
// want, and returns it: the handshake by which a test knows where the
// command is. The stream's end, or the test's bound, without such a line
// fails the test.
func (p *Process) Expect(stream *Lines, want string) string {
	p.t.Helper()
	for {
		select {
		case line := <-stream.next:
			if strings.Contains(line, want) {
				return line
			}
		case <-stream.closed:
			select {
			case line := <-stream.next:
				if strings.Contains(line, want) {
					return line
				}
				continue
			default:
			}
			p.t.Fatalf("the stream ended without a line containing %q; stdout %q, stderr %q", want, p.Stdout.All(), p.Stderr.All())
		case <-p.ctx.Done():
			p.t.Fatalf("no line containing %q (%v); stdout %q, stderr %q", want, context.Cause(p.ctx), p.Stdout.All(), p.Stderr.All())
		}
	}
}

// Lines is one output stream, read line by line as it comes.
type Lines struct {
	next   chan string   // each line, in order
	closed chan struct{} // closed at the stream's end
	mu     sync.Mutex
	text   strings.Builder
}

func readLines(r io.Reader) *Lines {
	l := &Lines{next: make(chan string, 1024), closed: make(chan struct{})}
	go func() {
		defer close(l.closed)
		s := bufio.NewScanner(r)
		for s.Scan() {
			l.mu.Lock()
			l.text.WriteString(s.Text() + "\n")
			l.mu.Unlock()
			select {
			case l.next <- s.Text():
			default: // nobody is waiting for lines this far on
			}
		}
	}()
	return l
}

// All is what the stream has said so far, every line ending in a
// newline.
func (l *Lines) All() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.text.String()
}
