package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"time"

	"leases"
	"leases/session"
)

// Environment variables that run gives CMD.
const (
	envResource = "LEASES_RESOURCE"
	envHolder   = "LEASES_HOLDER"
	envEpoch    = "LEASES_EPOCH"
)

// runArgs is run's command line, checked.
type runArgs struct {
	f        *flags
	resource string
	holder   string
	opts     session.Options
	grace    time.Duration
	wait     bool
	path     string   // CMD, found on PATH
	command  []string // CMD and its arguments, as given
}

// run runs CMD under the lease on RESOURCE, renewing it with a session,
// and stops CMD when the lease ends.
func (c *cli) run(name string, args []string) int {
	a, code, done := c.runArgs(name, args)
	if done {
		return code
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwardedSignals...)
	defer signal.Stop(sigs)

	ctx := context.Background()
	s, err := c.open(ctx, a.f, true)
	if err != nil {
		return c.fail(name, err)
	}
	defer c.closeStore(name, s)
	deadlines := newDeadlines()
	a.opts.OnEvent = deadlines.hook(a.opts.OnEvent)
	sess, code, granted := c.awaitGrant(ctx, name, s, a, sigs)
	if !granted {
		return code
	}
	lease := sess.Lease()
	c.warnTTL(name, s, a.opts.TTL, lease.ExpiresAt-lease.GrantedAt)
	child, err := startChild(c.cmdFor(a, lease), a.grace, deadlines, c.stderrFile())
	if err != nil {
		return c.fail(name, errors.Join(fmt.Errorf("start CMD: %w", err), sess.Close(ctx)))
	}

	stopped := c.supervise(child, sess, sigs, a.grace)
	state := child.finish()
	lost := stopped.lost
	if lost == nil {
		// CMD ended by itself: did it end under the lease? The session's
		// clock says, read now rather than trusting its timer to have run.
		lost = sess.Check()
	}
	if err := sess.Close(ctx); err != nil {
		fmt.Fprintf(c.stderr, "leases: %s: %s\n", name, oneLine(err.Error()))
	}
	if lost != nil {
		fmt.Fprintf(c.stderr, "leases: %s: the lease on %s at epoch %d ended before CMD did (%s); %s\n",
			name, lease.Resource, lease.Epoch, oneLine(lost.Error()), stopped.how(state))
		return exitLost
	}
	return exitStatus(state)
}

// runArgs parses and checks run's command line; done says run ends at
// once, with code: help asked for, or bad input (nothing was done).
func (c *cli) runArgs(name string, args []string) (a runArgs, code int, done bool) {
	f := c.newFlags(name, runUsage)
	holder := f.String("holder", defaultHolder(), "the holder's `name`")
	ttl := f.duration("ttl", session.DefaultTTL, "30s", "the lease's time-to-live, a `duration`, at the grant and at every renewal")
	margin := f.duration("margin", 0, "5s", "how long before the lease could expire the session ends and CMD is stopped, a `duration` (default TTL/5)")
	grace := f.duration("grace", 0, "1s", "how long before the session's deadline CMD gets SIGTERM (SIGKILL at the deadline), a `duration` at most half of TTL less the margin (default half the margin, at most a third)")
	wait := f.Bool("wait", false, "wait for the lease while another holds it, rather than exit 1")
	verbose := f.Bool("verbose", false, "log the session's grants, renewals and release on stderr")
	arguments, command, dashdash, code, done := c.parse(f, args)
	if done {
		return a, code, true
	}
	resource, err := oneArgument(name, arguments)
	if err == nil && (!dashdash || len(command) == 0) {
		err = usagef("no CMD: give it after --, as in leases run %s -- CMD [ARG...]", resource)
	}
	if err == nil {
		err = nonEmpty("holder", *holder) // it has a default
	}
	var g time.Duration
	if err == nil {
		g, err = checkGrace(*ttl, *margin, *grace)
	}
	var path string
	if err == nil {
		// Found before the lease is taken: a CMD that cannot run is bad
		// input, and nothing is done.
		if path, err = exec.LookPath(command[0]); err != nil {
			err = usagef("CMD %q: %v", command[0], err)
		}
	}
	if err != nil {
		return a, c.fail(name, err), true
	}
	a = runArgs{f: f, resource: resource, holder: *holder, grace: g, wait: *wait, path: path, command: command,
		opts: session.Options{TTL: *ttl, Margin: *margin, OnEvent: c.renewalFailed(name)}}
	if *verbose {
		a.opts.Logger = slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return a, 0, false
}

// awaitGrant acquires the lease, or waits for it with --wait, until it is
// granted or a signal comes; when it is not granted, run ends with code.
func (c *cli) awaitGrant(ctx context.Context, name string, s *store, a runArgs, sigs <-chan os.Signal) (sess *session.Session, code int, granted bool) {
	waiting, stopWaiting := context.WithCancel(ctx)
	defer stopWaiting()
	type grant struct {
		s   *session.Session
		err error
	}
	grants := make(chan grant, 1)
	go func() {
		sess, err := c.acquireSession(waiting, name, s, a.resource, a.holder, a.opts, a.wait)
		grants <- grant{sess, err}
	}()
	select {
	case g := <-grants:
		if g.err != nil {
			return nil, c.fail(name, g.err), false
		}
		return g.s, 0, true
	case sig := <-sigs:
		stopWaiting()
		if g := <-grants; g.s != nil {
			_ = g.s.Close(ctx)
		}
		fmt.Fprintf(c.stderr, "leases: %s: %v before the lease on %s was granted; CMD was not started\n", name, sig, a.resource)
		return nil, signalStatus(sig), false
	}
}

// cmdFor is CMD, to run under lease: the lease in its environment, and
// leases's own input and output.
func (c *cli) cmdFor(a runArgs, lease leases.Lease) *exec.Cmd {
	cmd := exec.Command(a.path, a.command[1:]...)
	cmd.Args[0] = a.command[0]
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, c.stdout, c.stderr
	cmd.Env = append(os.Environ(), envResource+"="+lease.Resource, envHolder+"="+lease.Holder,
		envEpoch+"="+strconv.FormatInt(lease.Epoch, 10))
	// Output CMD's leftovers still hold is given up on this long after
	// the process group has gone (it matters only for writers that are
	// not files, as in tests).
	cmd.WaitDelay = time.Second
	return cmd
}

// stderrFile is where the watchdog writes: leases's own stderr where it
// is a file, which the watchdog then holds itself, so that what it says
// does not pass through leases, which may be stopped or gone.
func (c *cli) stderrFile() io.Writer {
	if l, ok := c.stderr.(*lockedWriter); ok {
		if f, ok := l.w.(*os.File); ok {
			return f
		}
	}
	return c.stderr
}

// acquireSession starts the session: at once, or, with wait, after
// saying on stderr who holds the lease, by waiting for it.
func (c *cli) acquireSession(ctx context.Context, name string, s *store, resource, holder string, opts session.Options, wait bool) (*session.Session, error) {
	sess, err := session.Start(ctx, s.lessor, resource, holder, opts)
	if err == nil || !wait || isUsage(err) || errors.Is(err, leases.ErrStoreUnusable) {
		return sess, err
	}
	var held *leases.HeldError
	if errors.As(err, &held) {
		fmt.Fprintf(c.stderr, "leases: %s: %s is held by %s at epoch %d for %s more; waiting\n",
			name, resource, shown(held.Live.Holder), held.Live.Epoch, human(held.Live.ExpiresAt-held.At, !held.Live.Exact()))
	} else {
		fmt.Fprintf(c.stderr, "leases: %s: %s; waiting, and trying again\n", name, oneLine(err.Error()))
	}
	return session.Wait(ctx, s.lessor, resource, holder, opts)
}

// renewalFailed reports each renewal that failed without ending the
// session, on one line, while there is time to act.
func (c *cli) renewalFailed(name string) func(session.Event) {
	return func(ev session.Event) {
		if ev.Kind == session.RenewalFailed {
			fmt.Fprintf(c.stderr, "leases: %s: renewing %s failed; trying again until %s: %s\n",
				name, ev.Resource, ev.Deadline.Format("15:04:05.000"), oneLine(ev.Err.Error()))
		}
	}
}

// checkGrace checks --grace against the session's timing and returns it,
// its default filled in. CMD gets SIGTERM --grace before the session's
// deadline and SIGKILL at it; the deadline is the TTL less the margin and
// the drift allowance (span) after each renewal is sent, and a renewal is
// sent a third of span in. A grace of more than half of span would have
// SIGTERM come soon after a renewal was sent, before it could land.
func checkGrace(ttl, margin, grace time.Duration) (time.Duration, error) {
	// Each is 1ms or more where given (durationFlag), 0 where not.
	if margin == 0 {
		margin = ttl / 5 // the session's default
	}
	if margin >= ttl {
		return 0, usagef("--margin %v is not below --ttl %v", margin, ttl)
	}
	drift := time.Duration(float64(ttl.Milliseconds())*session.DefaultDrift) * time.Millisecond
	span := ttl - margin - drift
	switch {
	case grace == 0:
		return min(margin/2, span/3), nil
	case grace > span/2:
		return 0, usagef("--grace %v does not fit before the session's deadline: SIGTERM would come less than %v after a renewal was sent "+
			"(half of --ttl less the margin and the drift allowance); give a shorter --grace, a longer --ttl or a shorter --margin", grace, span-grace)
	}
	return grace, nil
}

// stopping is how supervise ended: why the lease ended, and what was
// sent to CMD.
type stopping struct {
	lost        error // why the session ended, when it ended before CMD
	terminated  bool  // SIGTERM sent (Windows: killed)
	killed      bool  // SIGKILL sent after the grace period
	signalsSent int   // signals passed on from leases
}

// how says how CMD was stopped: by the signal that ended it (sent by
// leases or by its watchdog), or what leases sent before CMD exited.
func (s stopping) how(state *os.ProcessState) string {
	sig, signalled := stoppedBy(state)
	switch {
	case signalled:
		return "CMD was stopped by " + sig
	case s.killed:
		return fmt.Sprintf("CMD was stopped: %s, then SIGKILL", terminateName)
	case s.terminated:
		return fmt.Sprintf("CMD was stopped: %s", terminateName)
	}
	return "CMD ended after the session's deadline"
}

// supervise waits for CMD to exit: it passes signals on, and when the
// session ends first, stops CMD (SIGTERM, then SIGKILL after grace).
func (c *cli) supervise(child *child, sess *session.Session, sigs <-chan os.Signal, grace time.Duration) stopping {
	var st stopping
	ended := sess.Done()
	var killAt <-chan time.Time
	for {
		select {
		case <-child.exited:
			return st
		case <-ended:
			ended = nil
			st.lost = sess.Err()
			st.terminated = true
			if err := child.terminate(); err != nil {
				fmt.Fprintf(c.stderr, "leases: run: stopping CMD: %v\n", err)
			}
			timer := time.NewTimer(grace)
			defer timer.Stop()
			killAt = timer.C
		case <-killAt:
			killAt = nil
			st.killed = true
			if err := child.kill(); err != nil {
				fmt.Fprintf(c.stderr, "leases: run: killing CMD: %v\n", err)
			}
		case sig := <-sigs:
			st.signalsSent++
			if err := child.forward(sig); err != nil {
				fmt.Fprintf(c.stderr, "leases: run: passing %v on to CMD: %v\n", sig, err)
			}
		}
	}
}

// child is CMD, started so that the platform can stop it whole.
type child struct {
	cmd *exec.Cmd
	// wd is CMD's watchdog, which leads CMD's process group (nil where
	// there is none, and CMD's process is the group); leader is the
	// group's leader, whose id is the group's.
	wd     *watchdog
	leader *os.Process
	// exited is closed when CMD has exited. Where the platform can tell
	// without collecting the exit (Linux, macOS), CMD is not yet reaped.
	exited chan struct{}
	// reaped is set before exited closes where CMD had to be reaped to
	// learn of its exit; without a watchdog to hold the group's id, the
	// group is then no longer signalled.
	reaped  bool
	waitErr error
}

// startChild starts CMD's watchdog (where there is one), tells it the
// session's deadline, and starts CMD in the watchdog's process group.
func startChild(cmd *exec.Cmd, grace time.Duration, d *deadlines, stderr io.Writer) (*child, error) {
	wd, err := startWatchdog(grace, stderr)
	if err != nil {
		return nil, err
	}
	ch := &child{cmd: cmd, wd: wd, exited: make(chan struct{})}
	if wd != nil {
		ch.leader = wd.leader()
		if err := wd.follow(d); err != nil {
			wd.stop()
			return nil, err
		}
	}
	prepare(cmd, ch.leader)
	if err := cmd.Start(); err != nil {
		if wd != nil {
			wd.stop()
		}
		return nil, err
	}
	if wd == nil {
		ch.leader = cmd.Process
	}
	go func() {
		defer close(ch.exited)
		if err := awaitExit(cmd.Process); err != nil {
			ch.reaped, ch.waitErr = true, cmd.Wait()
		}
	}()
	return ch, nil
}

func (ch *child) gone() bool {
	select {
	case <-ch.exited:
		return ch.reaped && ch.wd == nil
	default:
		return false
	}
}

func (ch *child) terminate() error {
	if ch.gone() {
		return nil
	}
	return terminateGroup(ch.leader)
}

func (ch *child) kill() error {
	if ch.gone() {
		return nil
	}
	return killGroup(ch.leader)
}

func (ch *child) forward(sig os.Signal) error {
	if ch.gone() {
		return nil
	}
	return signalGroup(ch.leader, sig)
}

// finish waits for CMD's exit, kills whatever CMD left running in its
// process group (and the watchdog), and collects CMD's exit.
func (ch *child) finish() *os.ProcessState {
	<-ch.exited
	switch {
	case ch.wd != nil:
		ch.wd.stop() // leftovers: nothing of CMD's outlives the lease
	case !ch.reaped:
		_ = killGroup(ch.leader)
	}
	if !ch.reaped {
		ch.waitErr = ch.cmd.Wait()
	}
	return ch.cmd.ProcessState
}

// defaultHolder names this process: host and pid.
func defaultHolder() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown-host"
	}
	return host + ":" + strconv.Itoa(os.Getpid())
}
