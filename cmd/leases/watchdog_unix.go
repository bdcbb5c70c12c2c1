//go:build unix

package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"leases/internal/roles"
)

// watchdogRole is this binary re-executed as CMD's watchdog (watch): the
// process that stops CMD at the session's deadline even when leases
// itself is stopped or starved and its own timer cannot run.
var watchdogRole = roles.Register("leases-watchdog", playWatchdog)

// watchdog is CMD's watchdog as the supervisor sees it: the leader of
// CMD's process group, and the pipe on which it hears each deadline.
type watchdog struct {
	cmd     *exec.Cmd
	pipe    *os.File      // the write end; its closing (or leases's death) is the end of the watchdog's input
	stopped chan struct{} // closed by stop: no more deadlines
}

// startWatchdog starts the watchdog, leading a process group of its own
// that CMD is then put in: the group's id is the watchdog's pid, which
// cannot be reused while the watchdog lives or is not yet reaped, so that
// the group may be signalled safely by either process until then.
func startWatchdog(grace time.Duration, stderr io.Writer) (*watchdog, error) {
	cmd, err := watchdogRole.Command(grace.String())
	if err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	ready, readyEnd, err := os.Pipe()
	if err != nil {
		return nil, errors.Join(err, r.Close(), w.Close())
	}
	defer ready.Close()
	cmd.Stdin, cmd.Stderr, cmd.ExtraFiles = r, stderr, []*os.File{readyEnd}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = time.Second // stderr, when it is not a file (tests)
	err = cmd.Start()
	_, _ = r.Close(), readyEnd.Close()
	if err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("start CMD's watchdog: %w", err)
	}
	wd := &watchdog{cmd: cmd, pipe: w, stopped: make(chan struct{})}
	// The handshake: the signals that run passes on to CMD's group reach
	// the watchdog too, and must find them ignored before CMD can start.
	if _, err := ready.Read(make([]byte, 1)); err != nil {
		wd.stop()
		return nil, fmt.Errorf("start CMD's watchdog: it ended before it was ready (%w)", err)
	}
	return wd, nil
}

// leader is the watchdog's process: its pid is CMD's process group.
func (wd *watchdog) leader() *os.Process { return wd.cmd.Process }

// follow tells the watchdog the session's deadline now, before CMD is
// started, and then each new one as the session renews.
func (wd *watchdog) follow(d *deadlines) error {
	if err := d.write(wd.pipe); err != nil {
		return fmt.Errorf("tell CMD's watchdog the deadline: %w", err)
	}
	go d.forward(wd.pipe, wd.stopped)
	return nil
}

// stop kills CMD's process group, the watchdog in it (and whatever of
// CMD's is left), and collects the watchdog's exit; the group's id is
// free for reuse only after that.
func (wd *watchdog) stop() {
	close(wd.stopped)
	_ = killGroup(wd.leader())
	_ = wd.pipe.Close()
	_ = wd.cmd.Wait()
}

// playWatchdog is the watchdog's process: args is the grace, its input
// the deadlines, its stderr leases's, and fd 3 the pipe on which it says
// it is ready. The signals that run passes on to
// CMD's group reach the watchdog too, and are ignored here: they are
// CMD's.
func playWatchdog(args []string) int {
	signal.Ignore(forwardedSignals...)
	// A stderr whose reader is gone must fail a write, not end the
	// watchdog before it has stopped CMD (Go's default for fd 2).
	signal.Ignore(syscall.SIGPIPE)
	if ready := os.NewFile(3, "ready"); ready != nil { // see startWatchdog
		_, err := ready.Write([]byte{'\n'})
		if err = errors.Join(err, ready.Close()); err != nil {
			fmt.Fprintf(os.Stderr, "leases: watchdog: %v\n", err)
			return exitFailed
		}
	}
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "leases: watchdog: want one argument, the grace")
		return exitUsage
	}
	grace, err := time.ParseDuration(args[0])
	if err != nil {
		fmt.Fprintf(os.Stderr, "leases: watchdog: %v\n", err)
		return exitUsage
	}
	group := os.Getpid()
	return watch(os.Stdin, grace, os.Stderr, func(sig syscall.Signal) error { return syscall.Kill(-group, sig) })
}

// watch is the watchdog: each line of in is CMD's deadline on the host
// clock (hostNow, nanoseconds), the latest replacing the one before; at
// the deadline less grace it sends SIGTERM to the group, at the deadline
// SIGKILL, which ends the watchdog too (it leads the group). The end of
// in, when leases closed it or died, is SIGKILL at once: nobody is left
// to renew the lease or to stop CMD. Each signal sent is said on stderr.
func watch(in io.Reader, grace time.Duration, stderr io.Writer, signalGroup func(syscall.Signal) error) int {
	lines := make(chan int64)
	go readDeadlines(in, lines, stderr)
	var deadline int64
	known, terminated := false, false // known: a deadline was read
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case d, ok := <-lines:
			if !ok {
				send(signalGroup, syscall.SIGKILL, stderr, "leases is gone")
				return exitLost
			}
			deadline, known = d, true
		case <-timer.C:
		}
		if !known {
			continue
		}
		now := hostNow()
		switch {
		case now >= deadline:
			send(signalGroup, syscall.SIGKILL, stderr, "at the session's deadline")
			return exitLost
		case !terminated && now >= deadline-int64(grace):
			terminated = true
			send(signalGroup, syscall.SIGTERM, stderr, fmt.Sprintf("--grace %v before the session's deadline", grace))
		}
		next := deadline
		if !terminated {
			next -= int64(grace)
		}
		timer.Reset(time.Duration(next - now))
	}
}

// readDeadlines sends each deadline of in on lines and closes it at the
// end of in (or a line that is no deadline, said on stderr).
func readDeadlines(in io.Reader, lines chan<- int64, stderr io.Writer) {
	defer close(lines)
	s := bufio.NewScanner(in)
	for s.Scan() {
		d, err := strconv.ParseInt(s.Text(), 10, 64)
		if err != nil {
			fmt.Fprintf(stderr, "leases: watchdog: not a deadline: %q\n", s.Text())
			return
		}
		lines <- d
	}
}

// send sends sig to CMD's group, saying why on stderr.
func send(signalGroup func(syscall.Signal) error, sig syscall.Signal, stderr io.Writer, why string) {
	name := map[syscall.Signal]string{syscall.SIGTERM: "SIGTERM", syscall.SIGKILL: "SIGKILL"}[sig]
	fmt.Fprintf(stderr, "leases: run: watchdog: %s to CMD's process group: %s\n", name, why)
	if err := signalGroup(sig); err != nil {
		fmt.Fprintf(stderr, "leases: run: watchdog: %s to CMD's process group: %v\n", name, err)
	}
}
