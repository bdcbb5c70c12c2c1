// Package command is the command run-experiment: its flags, the run of
// every scenario and the exploration on each backend, the document it
// writes and compares, and its exit status.
//
// Part of the evidence (what cmd/run-experiment reruns), not of the
// library: no API promise.
package command

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"leases/evidence/backend"
	"leases/evidence/explore"
	"leases/evidence/report"
	"leases/evidence/results"
	"leases/evidence/scenario"
)

// Exit statuses of the command.
const (
	ExitMatch    = 0 // the rerun matches --check byte for byte (or no --check)
	ExitMismatch = 1 // the rerun differs from --check
	ExitUsage    = 2 // bad flags, or a missing, unreadable or garbled file
	ExitFailed   = 3 // the experiment itself failed: a worker hung or died, the database failed
)

const usage = `usage: run-experiment [--output FILE] [--check FILE] [--timeout DURATION]
                      [--workers N] [--ttl TICKS] [--last-tick TICK] [--timings]
                      [--docs DIR]

Reruns every scenario with real worker processes on fresh temporary
databases and writes the semantic result as JSON to --output (standard
output when absent or -; a device or FIFO is written in place, a regular
file replaced atomically). With --check, compares it with FILE byte for byte.
--workers, --ttl and --last-tick bound the exploration of every schedule;
results.json was made with the defaults. --timings prints, on standard
error, how long each part took next to what it costs at the least here.
--docs draws the generated blocks of the documents under DIR (README.md
and docs/*.md: the run's pictures and tables, and code from the sources)
from this run, and rewrites the documents whose blocks changed.

Exit status: 0 match, 1 mismatch, 2 usage error or bad file,
3 the experiment failed.

`

// Command is the whole of cmd/run-experiment, for its main and for a test
// binary that plays the command, with the backends the binary knows: it
// runs Main on the process's arguments, with SIGINT and SIGTERM cancelling
// the run, so that an interrupted run still kills its workers and removes
// its temporary directories. It returns the exit status. The command
// re-executes itself as its workers: the binary registers the worker role
// (worker.Register, with the same backends) and calls roles.Run before
// Command.
func Command(drivers ...backend.Driver) int {
	ctx, stop := cancelOnSignal(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return Main(ctx, drivers, os.Args[1:], os.Stdout, os.Stderr)
}

// Main is the command run-experiment. It returns the exit status. Once ctx
// is done, the command reports why (context.Cause: the signal that
// interrupted it, say), not the error of the operation it interrupted.
func Main(ctx context.Context, drivers []backend.Driver, args []string, stdout, stderr io.Writer) int {
	fail := func(code int, format string, a ...any) int { return failf(stderr, code, format, a...) }
	// What an interrupted operation returns is only a consequence; once
	// ctx is done, its cause (the signal, say) is the one line.
	failed := func(what string, err error) int {
		if ctx.Err() != nil {
			return fail(ExitFailed, "%v", context.Cause(ctx))
		}
		return fail(ExitFailed, "%s: %v", what, err)
	}
	set, helped, err := parseArgs(args, stdout)
	switch {
	case helped:
		return ExitMatch
	case err != nil:
		return fail(ExitUsage, "%v", err)
	}
	// Everything that can be wrong with the files is found before anything runs.
	expected, expectedTree, err := set.files()
	if err != nil {
		return fail(ExitUsage, "%v", err)
	}

	start := time.Now()
	var stats RunStats
	doc, err := Run(ctx, drivers, Options{Timeout: set.timeout, Bounds: set.bounds, Stats: &stats})
	if err == nil {
		err = ctx.Err() // it finished as it was interrupted: write nothing
	}
	if err != nil {
		return failed("experiment failed", err)
	}
	got, err := results.Encode(doc)
	if err != nil {
		return failed("encode results", err)
	}
	if err := writeOutput(set.output, stdout, got); err != nil {
		return failed("write results", err)
	}
	if set.docs != "" {
		if err := drawDocuments(stderr, set.docs, doc); err != nil {
			return failed("draw the documents", err)
		}
	}
	printSummaries(stderr, doc)
	code := compareResults(stderr, set.check, expected, expectedTree, got)
	if set.timings {
		if err := printTimings(ctx, stderr, drivers, doc, &stats, time.Since(start)); err != nil {
			return failed("timings", err)
		}
	}
	return code
}

// settings are what the command line asks for.
type settings struct {
	output, check, docs string
	timeout             time.Duration
	timings             bool
	// bounds are the explored model's on every backend; zero: each
	// backend's own default (BoundsFor).
	bounds explore.Bounds
}

// parseArgs reads the command line. helped is true when it printed the
// usage (-h); err is a usage error, in one line.
func parseArgs(args []string, stdout io.Writer) (set settings, helped bool, err error) {
	flags := flag.NewFlagSet("run-experiment", flag.ContinueOnError)
	flags.SetOutput(io.Discard) // one-line errors, below
	flags.StringVar(&set.output, "output", "", "write the JSON `FILE` (default, or -: standard output)")
	flags.StringVar(&set.check, "check", "", "compare the rerun with `FILE`; exit 1 if they differ")
	flags.DurationVar(&set.timeout, "timeout", DefaultTimeout, "fail a run that hangs longer than `DURATION`")
	flags.BoolVar(&set.timings, "timings", false, "print the run's time, part by part, next to its floors, on standard error")
	flags.StringVar(&set.docs, "docs", "", "draw the generated blocks of the documents under `DIR` (README.md, docs/*.md) from this run")
	flags.IntVar(&set.bounds.Workers, "workers", explore.DefaultBounds.Workers, "explore with `N` workers (1 to 4)")
	flags.Int64Var(&set.bounds.TTL, "ttl", explore.DefaultBounds.TTL, "explore with leases of `TICKS` ticks")
	flags.Int64Var(&set.bounds.LastTick, "last-tick", explore.DefaultBounds.LastTick, "explore with the clock running from 0 to `TICK`")
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usage)
			flags.SetOutput(stdout)
			flags.PrintDefaults()
			return set, true, nil
		}
		return set, false, fmt.Errorf("%w (see -h)", err)
	}
	switch {
	case flags.NArg() > 0:
		return set, false, fmt.Errorf("unexpected argument %q (see -h)", flags.Arg(0))
	case set.timeout <= 0:
		return set, false, fmt.Errorf("--timeout must be positive, not %v", set.timeout)
	}
	if err := set.bounds.Check(); err != nil {
		return set, false, fmt.Errorf("exploration bounds: %w", err)
	}
	// Bounds given on the command line hold on every backend; without
	// them, each backend explores its own default (BoundsFor).
	given := false
	flags.Visit(func(f *flag.Flag) { given = given || f.Name == "workers" || f.Name == "ttl" || f.Name == "last-tick" })
	if !given {
		set.bounds = explore.Bounds{}
	}
	return set, false, nil
}

// files checks every file the command line names, and reads and parses
// the --check file.
func (set settings) files() (expected []byte, tree *results.Value, err error) {
	if set.check != "" {
		if expected, err = os.ReadFile(set.check); err != nil {
			return nil, nil, fmt.Errorf("cannot read --check file: %w", err)
		}
		if tree, err = results.Parse(expected); err != nil {
			return nil, nil, fmt.Errorf("--check file %s is not valid JSON: %w", set.check, err)
		}
		// A file of another shape can never match: say so now, not
		// after a whole run, and name where it differs.
		if err := results.CheckShape(tree); err != nil {
			return nil, nil, fmt.Errorf("--check file %s is not a results document: %w", set.check, err)
		}
	}
	if set.docs != "" {
		if _, err := os.Stat(filepath.Join(set.docs, "README.md")); err != nil {
			return nil, nil, fmt.Errorf("--docs %s has no README.md: %w", set.docs, err)
		}
	}
	if set.output != "" && set.output != stdoutName {
		if err := checkOutputPath(set.output, set.check); err != nil {
			return nil, nil, err
		}
	}
	return expected, tree, nil
}

// printSummaries writes a line per scenario and per explored protocol on
// every backend, and a line for every scenario that ran differently on
// two backends.
func printSummaries(stderr io.Writer, doc *results.Results) {
	for _, b := range doc.Backends {
		for _, sc := range b.Scenarios {
			fmt.Fprintf(stderr, "%-7s %s\n", b.Backend, scenarioSummary(sc))
		}
		for _, p := range b.Exploration.Protocols {
			fmt.Fprintf(stderr, "%-7s %s\n", b.Backend, protocolSummary(p))
		}
		if tool := b.Exploration.Tool; tool != nil {
			for _, v := range tool.Variants {
				fmt.Fprintf(stderr, "%-7s %-40s %d schedules (%d with a resend); double effects %d; stale effects %d\n", b.Backend,
					"explored tool, "+string(v.Variant), v.Schedules, v.Resent, v.DoubleEffects, v.StaleEffects)
			}
		}
	}
	for _, a := range doc.Agreement {
		if !a.Same {
			fmt.Fprintf(stderr, "run-experiment: %s ran differently on %v\n", a.Scenario, a.Backends)
		}
	}
}

// compareResults reports whether got matches the --check file and returns
// the exit status.
func compareResults(stderr io.Writer, check string, expected []byte, expectedTree *results.Value, got []byte) int {
	fail := func(code int, format string, a ...any) int { return failf(stderr, code, format, a...) }
	if check == "" {
		return ExitMatch
	}
	if bytes.Equal(expected, got) {
		fmt.Fprintf(stderr, "run-experiment: rerun matches %s byte for byte\n", check)
		return ExitMatch
	}
	gotTree, err := results.Parse(got)
	if err != nil {
		return fail(ExitFailed, "cannot parse own output: %v", err)
	}
	if d, differs := results.Compare(expectedTree, gotTree); differs {
		return fail(ExitMismatch, "rerun differs from %s %v", check, d)
	}
	return fail(ExitMismatch, "rerun means the same as %s but its bytes differ (formatting or key spelling); regenerate it with --output", check)
}

// failf prints the command's one-line error and returns code. Errors
// joined with errors.Join stand on one line, separated by "; ".
func failf(stderr io.Writer, code int, format string, a ...any) int {
	line := strings.ReplaceAll(fmt.Sprintf(format, a...), "\n", "; ")
	fmt.Fprintf(stderr, "run-experiment: %s\n", line)
	return code
}

// protocolSummary is one human-readable line: the protocol's figures.
func protocolSummary(p explore.ProtocolFigures) string {
	v := p.Violations
	line := fmt.Sprintf("%-40s %d schedules; I1-I5 violations %d/%d/%d/%d/%d; lost updates %d; gaps %d",
		"explored "+string(p.Protocol), p.Schedules, v.I1, v.I2, v.I3, v.I4, v.I5, p.LostUpdates, p.Gaps)
	if p.StaleAfterRead != nil {
		line += fmt.Sprintf("; stale after the new holder's read %d", *p.StaleAfterRead)
	}
	return line
}

// scenarioSummary is one human-readable line: the scenario and its
// verdicts.
func scenarioSummary(s scenario.Scenario) string {
	final := "nothing stored"
	if s.Final != nil {
		final = fmt.Sprintf("%q at epoch %d", s.Final.Value, s.Final.ValueEpoch)
	}
	if s.FinalToolEffects != nil {
		final = fmt.Sprintf("tool effects: %d", len(s.FinalToolEffects))
	}
	return fmt.Sprintf("%-40s %s; final %s", s.Name, strings.Join(s.Verdicts.Claims(), ", "), final)
}

// drawDocuments draws the generated blocks of the documents under dir
// from doc and rewrites, atomically, each document whose blocks changed,
// naming it on stderr.
func drawDocuments(stderr io.Writer, dir string, doc *results.Results) error {
	documents, unused, err := report.Documents(dir, doc)
	if err != nil {
		return err
	}
	for _, d := range documents {
		if d.Drawn == d.Text {
			continue
		}
		if err := writeFileAtomically(filepath.Join(dir, filepath.FromSlash(d.Path)), []byte(d.Drawn)); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "redrew %s\n", d.Path)
	}
	if len(unused) > 0 {
		fmt.Fprintf(stderr, "no document shows %q\n", unused)
	}
	return nil
}
