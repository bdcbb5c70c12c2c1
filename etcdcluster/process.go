package etcdcluster

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
)

// process is the harness's end of one member process, one incarnation:
// a restart is a new process.
type process struct {
	cmd   *exec.Cmd
	stdin *os.File // its input; closing it ends the member

	hello  chan struct{} // closed once it said its pid, ID and address, or exited
	ready  chan struct{} // closed once it serves, or exited
	exited chan struct{} // closed once it has been waited for

	// Set before hello is closed.
	pid int
	id  string

	// acked is the last command it acknowledged; under Cluster.mu.
	acked int64

	// ending is set when the harness ends it (Kill, Close): its end is
	// then no failure.
	ending atomic.Bool
	stderr lastWords
	// waitErr is why waiting failed, leaving the exit status unknown;
	// set before exited is closed.
	waitErr error
}

// startProcess starts member index's process with cfg, wrapped in the
// words wrap gives (strace and its options, say) if any. onReport is
// called with every report after the hello, in order; onExit once the
// process has been waited for.
func startProcess(cfg memberConfig, wrap []string, onReport func(p *process, r report), onExit func(p *process)) (*process, error) {
	arg, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	cmd, err := MemberRole.Command(string(arg))
	if err != nil {
		return nil, err
	}
	// One P: a member serves one request at a time in the tests, and
	// three members, a caller and its workers share a few cores; more
	// Ps only spin, looking for work, at every wake-up. Set from the
	// start, not by the member once it runs: the runtime's start and the
	// packages' init (etcd's registers hundreds of metrics, each with a
	// goroutine of its own) then run on one P too.
	cmd.Env = append(cmd.Env, "GOMAXPROCS=1")
	if len(wrap) > 0 {
		path, err := exec.LookPath(wrap[0])
		if err != nil {
			return nil, fmt.Errorf("etcdcluster: wrapper: %w", err)
		}
		cmd.Path, cmd.Args = path, append(append(wrap[:len(wrap):len(wrap)], cmd.Path), cmd.Args[1:]...)
	}
	childIn, stdin, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	stdout, childOut, err := os.Pipe()
	if err != nil {
		return nil, errors.Join(err, childIn.Close(), stdin.Close())
	}
	p := &process{cmd: cmd, stdin: stdin, hello: make(chan struct{}), ready: make(chan struct{}), exited: make(chan struct{})}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = childIn, childOut, &p.stderr
	err = cmd.Start()
	// The child has its own copies; the parent's must go, or the child's
	// stdout would never reach end-of-file.
	closeErr := errors.Join(childIn.Close(), childOut.Close())
	if err != nil {
		return nil, errors.Join(fmt.Errorf("etcdcluster: start %s: %w", cfg.Name, err), stdin.Close(), stdout.Close())
	}
	go p.read(stdout, onReport)
	go func() {
		p.wait()
		onExit(p)
		close(p.exited) // after onExit: whoever waits for the end knows how it counts
	}()
	if closeErr != nil {
		p.kill()
		return nil, closeErr
	}
	return p, nil
}

// send writes a command on the member's stdin. The pipe holds far more
// than a command; a paused member reads it when continued.
func (p *process) send(cmd command) error {
	line, err := json.Marshal(cmd)
	if err != nil {
		return err
	}
	_, err = p.stdin.Write(append(line, '\n'))
	return err
}

// read takes the member's reports until its stdout ends.
func (p *process) read(stdout *os.File, onReport func(p *process, r report)) {
	defer stdout.Close()
	lines := bufio.NewScanner(stdout)
	greeted, readied := false, false
	for lines.Scan() {
		var r report
		if json.Unmarshal(lines.Bytes(), &r) != nil {
			continue // not a report: the parent only learns less
		}
		switch {
		case !greeted && r.PID != 0:
			p.pid, p.id = r.PID, r.ID
			greeted = true
			close(p.hello)
		case greeted && r.Ready && !readied:
			readied = true
			close(p.ready)
		}
		if greeted {
			onReport(p, r)
		}
	}
	<-p.exited
	if !greeted {
		close(p.hello)
	}
	if !readied {
		close(p.ready)
	}
}

// wait waits for the process to end. When waiting fails, how it ended is
// unknown and it may not have ended at all: it is killed, so that no
// member outlives a harness that lost track of it.
func (p *process) wait() {
	err := p.cmd.Wait()
	_ = p.stdin.Close()
	if p.cmd.ProcessState != nil {
		return
	}
	p.waitErr = err
	_ = p.cmd.Process.Kill()
	_, _ = p.cmd.Process.Wait()
}

// kill ends the process with SIGKILL (TerminateProcess on Windows) and
// does not wait. Under a wrapper (strace), once the member has said its
// pid, only the member is killed: the wrapper then exits by itself with
// the member's status (strace kills itself with the signal its command
// died of), which tells a member the harness ended from one that had
// died by itself a moment before. Killed itself, the wrapper would say
// only that it was killed, and would let the member go on untraced (the
// member's own parent-death signal ends it then, on Linux).
func (p *process) kill() {
	p.ending.Store(true)
	if isClosed(p.hello) && p.pid != 0 && p.pid != p.cmd.Process.Pid {
		if member, err := os.FindProcess(p.pid); err == nil && member.Kill() == nil {
			return
		}
	}
	_ = p.cmd.Process.Kill()
}

// bidden reports whether the harness ended the process: it asked (kill),
// and the process died of that (SIGKILL where there are signals). A
// process that exited, or died otherwise, before or while the harness
// asked, ended by itself.
func (p *process) bidden() bool {
	return p.ending.Load() && p.cmd.ProcessState != nil && killedByHarness(p.cmd.ProcessState)
}

// running reports whether the process has not exited.
func (p *process) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// ended says how the process ended, with its last words; call it once
// wait has returned.
func (p *process) ended() string {
	how := "exit status unknown: "
	if p.waitErr != nil {
		how += p.waitErr.Error()
	} else {
		how = p.cmd.ProcessState.String()
	}
	if words := p.stderr.String(); words != "" {
		how += ": " + words
	}
	return how
}

// lastWords keeps what tells why a process failed, from what it writes
// on stderr: the first line of the most telling kind (a Go panic or fatal
// error, with the function it happened in; then a fatal or panic log line;
// then the member's own complaint; then an error log line), else the last
// line.
type lastWords struct {
	mu      sync.Mutex
	best    string // the first line of the most telling kind seen
	rank    int    // its rank in telling, len(telling) when none
	stack   int    // 1: best is a panic whose stack is to come; 2: the next line is its top frame
	last    string // the last line
	partial []byte // a line not yet ended
}

// telling are the starts of lines that say why a process fails, most
// telling first; lines of one rank are equal.
var telling = [][]string{
	{"panic: ", "fatal error: "},
	{"fatal\t", "panic\t", "dpanic\t"},
	{"etcd-member: "},
	{"error\t"},
}

func (w *lastWords) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.best == "" && w.rank == 0 {
		w.rank = len(telling)
	}
	w.partial = append(w.partial, b...)
	for {
		line, rest, ok := bytes.Cut(w.partial, []byte("\n"))
		if !ok {
			break
		}
		w.note(string(line))
		w.partial = rest
	}
	if len(w.partial) > 4096 { // a line without end: keep its start
		w.note(string(w.partial))
		w.partial = nil
	}
	return len(b), nil
}

func (w *lastWords) note(line string) {
	line = strings.TrimSpace(line)
	if line == "" {
		return
	}
	if len(line) > 400 {
		line = line[:400] + "..."
	}
	w.last = line
	switch {
	case w.stack == 1 && strings.HasPrefix(line, "goroutine "):
		w.stack = 2 // "goroutine 1 [running]:"; its top frame is next
		return
	case w.stack == 2:
		w.stack = 0
		w.best += " in " + function(line)
		return
	}
	for rank := 0; rank < w.rank; rank++ {
		for _, start := range telling[rank] {
			if strings.HasPrefix(line, start) {
				w.best, w.rank = line, rank
				if rank == 0 {
					w.stack = 1
				}
				return
			}
		}
	}
}

// function is the function a stack frame's line names: the line without
// its arguments, "pkg.(*T).M" of "pkg.(*T).M(0x1, ...)".
func function(frame string) string {
	if !strings.HasSuffix(frame, ")") {
		return frame
	}
	depth := 0
	for i := len(frame) - 1; i >= 0; i-- {
		switch frame[i] {
		case ')':
			depth++
		case '(':
			if depth--; depth == 0 {
				return frame[:i]
			}
		}
	}
	return frame
}

// String is the telling line, else the last one; quoted, on one line.
func (w *lastWords) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	line := w.best
	if line == "" {
		line = w.last
	}
	if line == "" && len(w.partial) > 0 {
		line = strings.TrimSpace(string(w.partial))
	}
	if line == "" {
		return ""
	}
	return fmt.Sprintf("%q", strings.ReplaceAll(line, "\t", " "))
}
