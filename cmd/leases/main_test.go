package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"leases/internal/roles"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"leases/testkit/testctx"
)

// The test binary plays two more parts, chosen by its first argument, so
// that the tests need no go build and no shell: the command itself, as
// cmd/leases's main runs it, and the CMDs that run starts.
const (
	asCommand = "leases-test-as-command" // then: the command's arguments
	asCMD     = "leases-test-as-cmd"     // then: a role of cmdRoles
)

func TestMain(m *testing.M) {
	roles.Run() // an etcd member of TestOnEtcd's cluster, if this process is one
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case asCommand:
			os.Exit(Main(os.Args[2:], os.Stdout, os.Stderr))
		case asCMD:
			role, ok := cmdRoles[os.Args[2]]
			if !ok {
				fmt.Fprintf(os.Stderr, "no CMD role %q\n", os.Args[2])
				os.Exit(125)
			}
			os.Exit(role(os.Args[3:]))
		}
	}
	os.Exit(m.Run())
}

// cmdRoles are the CMDs the tests run under a lease. Each says what it
// does on its standard output, one line at a time, for the test to read.
var cmdRoles = map[string]func(args []string) int{
	// env prints the lease it was given and exits with its argument's
	// status (0 when none).
	"env": func(args []string) int {
		fmt.Printf("%s=%s %s=%s %s=%s\n", envResource, os.Getenv(envResource), envHolder, os.Getenv(envHolder),
			envEpoch, os.Getenv(envEpoch))
		if len(args) > 0 {
			var status int
			_, _ = fmt.Sscan(args[0], &status)
			return status
		}
		return 0
	},
	// hold says "started EPOCH", appends "start EPOCH" to the file its
	// argument names (if any), holds until its input ends, appends "end
	// EPOCH", says "done EPOCH" and exits 0.
	"hold": func(args []string) int {
		epoch := os.Getenv(envEpoch)
		appendLine(args, "start "+epoch)
		fmt.Printf("started %s\n", epoch)
		_, _ = io.Copy(io.Discard, os.Stdin)
		appendLine(args, "end "+epoch)
		fmt.Printf("done %s\n", epoch)
		return 0
	},
}

// appendLine appends line to the file args[0] names, if any.
func appendLine(args []string, line string) {
	if len(args) == 0 {
		return
	}
	f, err := os.OpenFile(args[0], os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err == nil {
		_, err = fmt.Fprintln(f, line)
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(125)
	}
}

// cmd is the words that run a CMD role: this test binary.
func cmd(t *testing.T, role string, args ...string) []string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{exe, asCMD, role}, args...)
}

// result is how a command ended.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
}

// invoke runs the command in this process, with env as its environment
// (nothing of the test's own), and returns how it ended.
func invoke(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	c := &cli{stdout: &stdout, stderr: &lockedWriter{w: &stderr}, getenv: func(k string) string { return env[k] }}
	code := c.main(args)
	return result{code, stdout.String(), stderr.String()}
}

// process is the command running as a process of its own: its output
// read line by line as it comes, its input the test's to write and close.
type process struct {
	t      *testing.T
	ctx    context.Context
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *lines
	stderr *lines
	done   chan struct{}
	res    result
}

// start starts the command with args, in a process of its own (its CMD
// is this binary too); it is killed when the test ends, if still running.
func start(t *testing.T, args ...string) *process {
	t.Helper()
	ctx := testctx.Context(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := &process{t: t, ctx: ctx, done: make(chan struct{})}
	p.cmd = exec.Command(exe, append([]string{asCommand}, args...)...)
	p.cmd.Env = withoutStoreEnv(os.Environ())
	// The command's input is a pipe the test closes (not StdinPipe's,
	// which Wait closes): CMDs that hold until their input ends, and
	// what they start, hold until the test says.
	stdin, writeEnd, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stdin, p.stdin = stdin, writeEnd
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	err = p.cmd.Start()
	_ = stdin.Close()
	if err != nil {
		_ = writeEnd.Close()
		t.Fatal(err)
	}
	p.stdout, p.stderr = readLines(stdout), readLines(stderr)
	go func() {
		defer close(p.done)
		<-p.stdout.closed
		<-p.stderr.closed
		err := p.cmd.Wait()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			p.res.code = -1
		} else {
			p.res.code = p.cmd.ProcessState.ExitCode()
		}
		p.res.stdout, p.res.stderr = p.stdout.all(), p.stderr.all()
	}()
	t.Cleanup(func() {
		_ = p.stdin.Close()
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill() // its CMD dies with it, or by the test's own cleanup
		}
	})
	return p
}

// withoutStoreEnv is env without LEASES_STORE: the tests say where the
// leases are.
func withoutStoreEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, storeEnv+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// wait waits for the command to exit, and for every process that holds
// its output, and returns how it ended.
func (p *process) wait() result {
	p.t.Helper()
	select {
	case <-p.done:
		return p.res
	case <-p.ctx.Done():
		// Something still holds its output, or it hangs: fail now, with
		// what it said (the cleanup kills it).
		p.t.Fatalf("the command did not end (%v): stdout %q, stderr %q", context.Cause(p.ctx), p.stdout.all(), p.stderr.all())
		return result{}
	}
}

// lines is one output stream, read line by line as it comes.
type lines struct {
	next   chan string   // each line, in order
	closed chan struct{} // closed at the stream's end
	mu     sync.Mutex
	text   strings.Builder
}

func readLines(r io.Reader) *lines {
	l := &lines{next: make(chan string, 1024), closed: make(chan struct{})}
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

func (l *lines) all() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.text.String()
}

// expect waits for a line of stream that contains want, and returns it:
// the handshake by which a test knows where the command is.
func (p *process) expect(stream *lines, want string) string {
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
			p.t.Fatalf("the stream ended without a line containing %q; stdout %q, stderr %q", want, p.stdout.all(), p.stderr.all())
		case <-p.ctx.Done():
			p.t.Fatalf("no line containing %q (%v); stdout %q, stderr %q", want, context.Cause(p.ctx), p.stdout.all(), p.stderr.all())
		}
	}
}

// sqliteFile is a path for a SQLite file of the test's own.
func sqliteFile(t *testing.T) string { return filepath.Join(t.TempDir(), "leases.db") }
