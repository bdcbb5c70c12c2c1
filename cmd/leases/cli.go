package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"leases"
)

// Exit statuses, the same for every command (see usage.go).
const (
	exitOK      = 0 // success; for run, CMD's own status under the lease
	exitRefused = 1 // refused: held by another, not the holder, expired
	exitUsage   = 2 // usage or bad input: nothing was done
	exitFailed  = 3 // the store failed or could not be reached, or an outcome is unknown
	exitLost    = 4 // run: the lease ended before CMD did; CMD was stopped
)

// Main runs the command with args (without the program's name), writing
// its output to stdout and its errors, one line each, to stderr, and
// returns its exit status. run's CMD reads the process's standard input.
func Main(args []string, stdout, stderr io.Writer) int {
	c := &cli{stdout: stdout, stderr: &lockedWriter{w: stderr}, getenv: os.Getenv}
	return c.main(args)
}

// cli is one invocation of the command.
type cli struct {
	stdout io.Writer
	stderr io.Writer // safe for run's goroutines
	getenv func(string) string
}

// lockedWriter serialises writes, so that lines from run's goroutines
// never interleave.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// subcommand is one of the command's commands.
type subcommand struct {
	name  string
	usage string // the command's help, from usage.go
	run   func(c *cli, name string, args []string) int
}

var subcommands = []subcommand{
	{"holders", holdersUsage, (*cli).holders},
	{"acquire", acquireUsage, (*cli).acquire},
	{"renew", renewUsage, (*cli).renew},
	{"release", releaseUsage, (*cli).release},
	{"run", runUsage, (*cli).run},
}

func (c *cli) main(args []string) int {
	if len(args) == 0 {
		fmt.Fprint(c.stderr, mainUsage())
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(c.stdout, mainUsage())
		return exitOK
	}
	for _, sc := range subcommands {
		if sc.name == args[0] {
			return sc.run(c, sc.name, args[1:])
		}
	}
	return c.fail("", usagef("unknown command %q; want one of holders, acquire, renew, release, run (leases -h)", args[0]))
}

// fail writes err as one line and returns its exit status: 2 for bad
// usage or input, 1 for a refusal, 3 for anything else (a failure, or an
// unknown outcome, which the error says).
func (c *cli) fail(command string, err error) int {
	prefix := "leases: "
	if command != "" {
		prefix += command + ": "
	}
	fmt.Fprintln(c.stderr, prefix+oneLine(err.Error()))
	return statusOf(err)
}

// statusOf is the exit status of a command that ended with err.
func statusOf(err error) int {
	switch {
	case err == nil:
		return exitOK
	case isUsage(err):
		return exitUsage
	case leases.IsRefusal(err):
		return exitRefused
	}
	return exitFailed
}

// oneLine is s on one line: each line break a " ; ". Spaces are kept as
// they are, for the names an error quotes.
func oneLine(s string) string {
	var lines []string
	for _, l := range strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' }) {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, " ; ")
}

// flags is one command's flag set, with the store's flags on it.
type flags struct {
	*flag.FlagSet
	store *storeFlags
	usage string
	// bad is the error of the first flag whose value was bad (see check).
	bad error
}

// duration defines a duration flag (see durationVar) and returns where
// its value is kept.
func (f *flags) duration(name string, def time.Duration, example, usage string) *time.Duration {
	d := new(time.Duration)
	durationVar(f.FlagSet, d, name, def, example, usage)
	return d
}

func (c *cli) newFlags(name, usage string) *flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are ours to print, in one line
	return &flags{FlagSet: fs, store: defineStoreFlags(fs), usage: usage}
}

// parse parses args, flags and arguments in any order, as operators type
// them ("run R --ttl 30s -- CMD"): every word that is neither a flag nor
// a flag's value is an argument, and so is every word after the first
// "--" (returned apart, with dashdash, for run's CMD). A flag's value
// that is itself "--" must be written --flag=--. done is true when the
// command must return code at once: -h, or bad usage (already printed).
func (c *cli) parse(f *flags, args []string) (arguments, afterDashes []string, dashdash bool, code int, done bool) {
	f.check()
	var words []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			afterDashes, dashdash = args[i+1:], true
			break
		}
		if len(a) < 2 || a[0] != '-' {
			arguments = append(arguments, a)
			continue
		}
		words = append(words, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		fl := f.Lookup(name)
		if fl == nil {
			continue // Parse reports it
		}
		if b, ok := fl.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			continue
		}
		if i+1 == len(args) || args[i+1] == "--" {
			return nil, nil, false, c.fail(f.Name(), needsValue(fl)), true
		}
		i++
		words = append(words, args[i])
	}
	switch err := f.Parse(words); {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(c.stdout, f.help())
		return nil, nil, false, exitOK, true
	case f.bad != nil:
		return nil, nil, false, c.fail(f.Name(), f.bad), true
	case err != nil:
		return nil, nil, false, c.fail(f.Name(), usagef("%v (leases %s -h)", err, f.Name())), true
	}
	return arguments, afterDashes, dashdash, 0, false
}

// help is the command's usage and its flags.
func (f *flags) help() string {
	var b strings.Builder
	b.WriteString(f.usage)
	fmt.Fprintf(&b, "\nSTORE is %s; or, when no flag says, %s in the environment.\n", storeChoices(), envExamples())
	b.WriteString("\nFlags:\n")
	f.VisitAll(func(fl *flag.Flag) { // PrintDefaults knows the flag package's own values
		if c, ok := fl.Value.(*checked); ok {
			fl.Value = c.Value
		}
	})
	f.SetOutput(&b)
	f.PrintDefaults()
	f.SetOutput(io.Discard)
	b.WriteString("\n" + exitStatuses)
	return b.String()
}

// open opens the store for a command; create is whether the command may
// create it.
func (c *cli) open(ctx context.Context, f *flags, create bool) (*store, error) {
	return f.store.open(ctx, c.getenv, create)
}

// closeStore closes s, reporting a failure on stderr: the command's
// outcome was decided before.
func (c *cli) closeStore(command string, s *store) {
	if err := s.close(); err != nil {
		fmt.Fprintf(c.stderr, "leases: %s: closing the store: %s\n", command, oneLine(err.Error()))
	}
}

// requireDuration refuses a duration flag that the command line did not
// give (a value it gave was checked as it was set: see durationFlag).
func requireDuration(f *flags, name string) error {
	if !f.given(name) {
		return usagef("--%s is required: a duration such as 30s", name)
	}
	return nil
}

// oneArgument is the command's one argument, the resource.
func oneArgument(command string, arguments []string) (string, error) {
	if len(arguments) != 1 {
		return "", usagef("want one RESOURCE, got %d arguments %q (leases %s -h)", len(arguments), arguments, command)
	}
	return arguments[0], nil
}

// firstErr is the first error that is not nil, so that a message stays
// one line when several things are wrong.
func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
