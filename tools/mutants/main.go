// Command mutants is a small mutation tester for this module. It makes
// mutants of the non-test Go files it is given, one small change each,
// and runs the contract suite and then the whole suite against each, to
// find the changes that no test notices.
//
// Run it from the module root:
//
//	go run ./tools/mutants                  # a sample of 350 mutants (seed 1)
//	go run ./tools/mutants -all -o all.txt  # every mutant
//	go run ./tools/mutants -list            # only list what it would test
//	go run ./tools/mutants -only 17,42 -v   # rerun mutants 17 and 42, with test output
//	go run ./tools/mutants ./internal/rules ./evidence/results/compare.go
//
// Arguments are package directories (every non-test .go file that builds)
// or file globs; by default the root package, internal/rules,
// internal/sqlitestore, the comparison of results files, the scenarios'
// verdicts and the explorer. The operators: cmp-boundary (< and <=, > and >=
// swapped), cmp-negate (a comparison flipped), and-or (&& and || swapped),
// if-negate (an if condition that is not a comparison negated),
// plus-minus-one (+ 1 and - 1 swapped), const-inc and const-dec (an
// integer constant c becomes c+1 or c-1), drop-stmt (an assignment, ++/--
// or a call whose result is unused removed), drop-errcheck (an
// `if err != nil { ... return }` never taken) and return-bool (a returned
// true or false flipped).
//
// The working tree is never touched: each mutated file is written to a
// temporary directory and handed to the go command with -overlay (through
// GOFLAGS). For each mutant the tool first builds the mutated package (a
// mutant that does not compile is counted apart and not tested), then runs
// the contract command (by default `go test -count=1 -vet=off -run
// '^(T1|...|T17)$' .`, the top-level tests of leases_test.go), and, if that
// passes, the suite command (`go test -count=1 -vet=off ./...`). Vet is off
// so that a kill is always a test's (go test's vet would reject, say, a
// swapped && as a "suspect or"). Each command gets five times the
// unmutated run's time plus 30 s (measured first; -timeout overrides it);
// a mutant that makes a test hang past that is killed, and the report
// says "timeout". A failure is confirmed before it counts: the failing
// tests are rerun on their own (a -run flag appended), or the whole
// command after a timeout, and if that passes the failure was the load
// of the machine, not the mutant: the report calls it flaky and goes on.
// At most -j mutants run at once (default 2, never more than the CPUs),
// as each starts worker processes of its own. Every command runs in a
// process group of its own, with TMPDIR and GOTMPDIR in the sweep's
// temporary directory, and the group is killed when the command ends, so
// no worker process outlives it.
//
// With -overlay, every run also gets the files of a go -overlay file: a
// proposed test can be tried against the mutants it should kill (say,
// -only 326 -overlay add.json -contract "go test -count=1 -run ^TestNew$ .")
// without touching the working tree. The unmutated run must pass it.
//
// The report (-o) lists the tested mutants in file and line order: id,
// place, operator, status (killed-contract, killed-suite, survived,
// not-compiled) with the failing tests, then the changed line before (-)
// and after (+). It ends with a table per file and a summary line, which
// is also printed. Ids number every mutant of the given files in file and
// offset order, so they stay the same while the code and the arguments
// do; the report
// holds no times, so two sweeps of the same code and sample compare with
// diff (but for a flaky test).
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

var defaultTargets = []string{".", "./internal/rules", "./internal/sqlitestore",
	"./evidence/results/compare.go", "./evidence/scenario/verdicts.go", "./evidence/explore"}

func main() {
	if err := sweep(); err != nil {
		fmt.Fprintln(os.Stderr, "mutants:", err)
		os.Exit(1)
	}
}

// sweep is the command; its error is the exit status's reason.
func sweep() error {
	out := flag.String("o", "mutants-report.txt", "write the report to `FILE`")
	sample := flag.Int("n", 350, "test a random sample of `N` mutants")
	all := flag.Bool("all", false, "test every mutant")
	seed := flag.Uint64("seed", 1, "the sample's random `SEED`")
	only := flag.String("only", "", "test only the mutants with these `IDS` (comma-separated)")
	jobs := flag.Int("j", 2, "test `N` mutants at a time (the suite starts processes of its own)")
	contractFile := flag.String("contract-file", "leases_test.go", "the contract command runs the top-level tests of `FILE`")
	contract := flag.String("contract", "", "the contract `COMMAND` (default: go test -count=1 -vet=off -run '^(tests of -contract-file)$' .)")
	suite := flag.String("suite", "go test -count=1 -vet=off ./...", "the `COMMAND` for mutants that survive the contract; empty: none")
	timeout := flag.Duration("timeout", 0, "each command's limit per mutant (default: 5x the unmutated run + 30s)")
	list := flag.Bool("list", false, "list the mutants and exit")
	extra := flag.String("overlay", "", "also put in place, in every run, the files of this go -overlay `FILE` (say, a proposed test)")
	verbose := flag.Bool("v", false, "print every command's output")
	flag.Parse()

	root, err := moduleRoot()
	if err != nil {
		return err
	}
	targets := flag.Args()
	if len(targets) == 0 {
		targets = defaultTargets
	}
	files, err := goFiles(root, targets)
	if err != nil {
		return err
	}
	mutants, sources, err := generate(root, files)
	if err != nil {
		return err
	}
	chosen, how, err := choose(mutants, *only, *all, *sample, *seed)
	if err != nil {
		return err
	}
	if *list {
		for _, m := range chosen {
			before, after := m.lines(sources[m.File])
			fmt.Printf("%d %s:%d:%d %s\n\t- %s\n\t+ %s\n", m.ID, m.File, m.Line, m.Col, m.Op, before, after)
		}
		fmt.Printf("%d mutants in %d files; listed %s\n", len(mutants), len(files), how)
		return nil
	}

	stages, err := stagesOf(root, *contract, *contractFile, *suite)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	scratch, err := reachableTemp("", "mutants-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	r := &runner{root: root, scratch: scratch, verbose: *verbose}
	if *extra != "" {
		if r.extra, err = readOverlay(*extra); err != nil {
			return err
		}
	}
	if err := limits(ctx, r, stages, *timeout); err != nil {
		return err
	}

	start := time.Now()
	r.testAll(ctx, chosen, sources, stages, min(max(1, *jobs), runtime.NumCPU()))
	summary, err := writeReport(*out, len(mutants), chosen, sources, how, targets, stages)
	if err != nil {
		return err
	}
	fmt.Printf("%s (%v)\nreport: %s\n", summary, time.Since(start).Round(time.Second), *out)
	return ctx.Err()
}

// stagesOf builds the contract stage (by default the top-level tests of
// contractFile) and, unless suite is empty, the suite stage.
func stagesOf(root, contract, contractFile, suite string) ([]stage, error) {
	contractArgs := strings.Fields(contract)
	if len(contractArgs) == 0 {
		var err error
		if contractArgs, err = contractCommand(root, contractFile); err != nil {
			return nil, err
		}
	}
	stages := []stage{{args: contractArgs, kills: killedByContract}}
	if suiteArgs := strings.Fields(suite); len(suiteArgs) > 0 {
		stages = append(stages, stage{args: suiteArgs, kills: killedBySuite})
	}
	return stages, nil
}

// readOverlay reads the Replace entries of a go -overlay file.
func readOverlay(file string) (map[string]string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var spec struct{ Replace map[string]string }
	if err := json.Unmarshal(data, &spec); err != nil {
		return nil, fmt.Errorf("-overlay %s: %w", file, err)
	}
	return spec.Replace, nil
}

// reachableTemp is os.MkdirTemp, but readable and searchable by every
// user: the commands' TMPDIR lies under it, and a test that starts a
// server as another user (package postgres/pgtest runs PostgreSQL as its
// owner, which must reach its data directory there) fails in a 0700
// directory before any mutant is tested.
func reachableTemp(dir, pattern string) (string, error) {
	made, err := os.MkdirTemp(dir, pattern)
	if err != nil {
		return "", err
	}
	if err := os.Chmod(made, 0o755); err != nil {
		return "", errors.Join(err, os.RemoveAll(made))
	}
	return made, nil
}

// moduleRoot is the nearest directory upward that holds go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod here or above")
		}
		dir = parent
	}
}

// goFiles expands targets (directories, or globs of files) into the
// non-test Go files that build here, relative to root, sorted.
func goFiles(root string, targets []string) ([]string, error) {
	var files []string
	for _, t := range targets {
		matches, err := filepath.Glob(t)
		if err != nil || len(matches) == 0 {
			return nil, fmt.Errorf("%s: no such directory or file", t)
		}
		var candidates []string
		for _, m := range matches {
			info, err := os.Stat(m)
			if err != nil || !info.IsDir() {
				candidates = append(candidates, m)
				continue
			}
			entries, err := os.ReadDir(m)
			if err != nil {
				return nil, err
			}
			for _, e := range entries {
				candidates = append(candidates, filepath.Join(m, e.Name()))
			}
		}
		for _, m := range candidates {
			dir, name := filepath.Split(m)
			if ok, err := build.Default.MatchFile(dir, name); err != nil || !ok || strings.HasSuffix(name, "_test.go") {
				continue
			}
			abs, err := filepath.Abs(m)
			if err != nil {
				return nil, err
			}
			rel, err := filepath.Rel(root, abs)
			if err != nil || strings.HasPrefix(rel, "..") {
				return nil, fmt.Errorf("%s is outside the module at %s", m, root)
			}
			files = append(files, filepath.ToSlash(rel))
		}
	}
	slices.Sort(files)
	return slices.Compact(files), nil
}

// choose picks the mutants to test and says how, for the report.
func choose(mutants []*mutant, only string, all bool, n int, seed uint64) ([]*mutant, string, error) {
	switch {
	case only != "":
		var chosen []*mutant
		for _, field := range strings.Split(only, ",") {
			id, err := strconv.Atoi(strings.TrimSpace(field))
			if err != nil || id < 1 || id > len(mutants) {
				return nil, "", fmt.Errorf("-only: no mutant %q (ids run from 1 to %d)", field, len(mutants))
			}
			chosen = append(chosen, mutants[id-1])
		}
		slices.SortFunc(chosen, func(a, b *mutant) int { return cmp.Compare(a.ID, b.ID) })
		return slices.Compact(chosen), "the mutants " + only, nil
	case all || n >= len(mutants):
		return mutants, "all of them", nil
	}
	perm := rand.New(rand.NewPCG(seed, seed)).Perm(len(mutants))[:n]
	slices.Sort(perm)
	chosen := make([]*mutant, n)
	for i, p := range perm {
		chosen[i] = mutants[p]
	}
	return chosen, fmt.Sprintf("a sample of %d (seed %d)", n, seed), nil
}

// contractCommand runs exactly the top-level tests of the contract file
// (relative to root).
func contractCommand(root, file string) ([]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(root, file), nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Test") {
			names = append(names, fn.Name.Name)
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%s has no top-level tests", file)
	}
	return []string{"go", "test", "-count=1", "-vet=off", "-run", "^(" + strings.Join(names, "|") + ")$", "./" + filepath.ToSlash(filepath.Dir(file))}, nil
}

// limits runs every stage once on the unmutated code, which must pass,
// and sets each stage's time limit from it, unless fixed is set.
func limits(ctx context.Context, r *runner, stages []stage, fixed time.Duration) error {
	for i := range stages {
		s := &stages[i]
		if fixed > 0 {
			s.timeout = fixed
			continue
		}
		dir, err := reachableTemp(r.scratch, "unmutated-")
		if err != nil {
			return err
		}
		res := r.run(ctx, dir, nil, time.Hour, s.args)
		if err := errors.Join(ctx.Err(), os.RemoveAll(dir)); err != nil {
			return err
		}
		if !res.ok {
			return fmt.Errorf("the unmutated code fails %q: %s", strings.Join(s.args, " "), res.failed)
		}
		s.timeout = 5*res.took + 30*time.Second
		fmt.Fprintf(os.Stderr, "unmutated: %s took %v; limit per mutant %v\n",
			strings.Join(s.args, " "), res.took.Round(100*time.Millisecond), s.timeout.Round(time.Second))
	}
	return nil
}
