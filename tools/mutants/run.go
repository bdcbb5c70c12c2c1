package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// A mutant's status in the report.
const (
	notRun           = "not-run"         // the sweep was interrupted first
	notCompiled      = "not-compiled"    // go build fails; not counted as generated-and-tested
	killedByContract = "killed-contract" // the contract command failed (or timed out)
	killedBySuite    = "killed-suite"    // the contract passed, the whole suite failed (or timed out)
	survived         = "survived"        // every command passed
)

// runner runs go commands in the module root, each in a process group of
// its own with private temporary directories, so that a mutant's hung or
// orphaned test processes can be found and ended.
type runner struct {
	root    string
	scratch string            // the sweep's temporary directory
	extra   map[string]string // overlay entries every run gets (-overlay)
	verbose bool
}

// result is what one command run did.
type result struct {
	ok, timedOut bool
	tests        []string // the top-level tests that failed
	failed       string   // the failing tests, or the output's last line
	output       []byte
	took         time.Duration
}

// run runs args in dir's temporary directories, with the files of
// replace (a path in the module and the file to read in its place) and of
// r.extra put in place through an -overlay file, and kills it with all
// its descendants after timeout. A test that hangs is a test that failed:
// a mutant that makes it hang is killed, and the result says so.
func (r *runner) run(ctx context.Context, dir string, replace map[string]string, timeout time.Duration, args []string) result {
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(tctx, args[0], args[1:]...)
	cmd.Dir = r.root
	tmp, gotmp := filepath.Join(dir, "tmp"), filepath.Join(dir, "gotmp")
	for _, d := range []string{tmp, gotmp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return result{failed: err.Error()}
		}
	}
	goflags := os.Getenv("GOFLAGS")
	if all := merge(r.extra, replace); len(all) > 0 {
		overlay := filepath.Join(dir, "overlay.json")
		spec, _ := json.Marshal(map[string]map[string]string{"Replace": all})
		if err := os.WriteFile(overlay, spec, 0o644); err != nil {
			return result{failed: err.Error()}
		}
		goflags = strings.TrimSpace(goflags + " -overlay=" + overlay)
	}
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "GOTMPDIR="+gotmp, "GOFLAGS="+goflags)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// go test and the test binaries it starts share a process group, and
	// ending the group ends them all (and the workers of a test binary end
	// with it: see evidence/worker).
	inOwnProcessGroup(cmd)
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	err := cmd.Run()
	if cmd.Process != nil {
		_ = killProcessGroup(cmd) // a straggler a mutant left behind
	}
	res := result{ok: err == nil, output: out.Bytes(), took: time.Since(start)}
	res.timedOut = ctx.Err() == nil && errors.Is(tctx.Err(), context.DeadlineExceeded)
	if !res.ok {
		res.tests, res.failed = failures(res.output)
	}
	if r.verbose {
		fmt.Fprintf(os.Stderr, "$ %s\n%s", strings.Join(args, " "), res.output)
	}
	return res
}

var (
	failLine  = regexp.MustCompile(`(?m)^--- FAIL: (\S+)`)
	panicLine = regexp.MustCompile(`(?m)^(panic|fatal error): .*`)
	// testLine is what t.Error and t.Fatal print: file:line: message.
	testLine = regexp.MustCompile(`(?m)^\s+(\S+_test\.go:\d+: .*)$`)
)

// failures returns the top-level tests that failed and a one-line
// account: their names, or else what the output ends with.
func failures(out []byte) ([]string, string) {
	var names []string
	for _, m := range failLine.FindAllSubmatch(out, -1) {
		names = append(names, string(m[1]))
	}
	if len(names) > 0 {
		slices.Sort(names)
		names = slices.Compact(names)
		return names, strings.Join(names, " ")
	}
	if p := panicLine.Find(out); p != nil {
		return nil, string(p)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return nil, lines[len(lines)-1]
}

// testAll tests the mutants, jobs at a time, printing each verdict as it
// comes; those it has not started when ctx ends stay not-run.
func (r *runner) testAll(ctx context.Context, chosen []*mutant, sources map[string]*sourceFile, stages []stage, jobs int) {
	for _, m := range chosen {
		m.Status = notRun
	}
	start := time.Now()
	var mu sync.Mutex
	done := 0
	queue := make(chan *mutant)
	var wg sync.WaitGroup
	for range jobs {
		wg.Go(func() {
			for m := range queue {
				began := time.Now()
				r.test(ctx, m, sources[m.File], stages)
				mu.Lock()
				done++
				elapsed := time.Since(start)
				left := elapsed / time.Duration(done) * time.Duration(len(chosen)-done)
				fmt.Fprintf(os.Stderr, "[%d/%d] %d %s:%d %s: %s %s (%v; %v so far, about %v left)\n",
					done, len(chosen), m.ID, m.File, m.Line, m.Op, m.Status, m.Detail,
					time.Since(began).Round(time.Second), elapsed.Round(time.Second), left.Round(time.Minute))
				mu.Unlock()
			}
		})
	}
	for _, m := range chosen {
		if ctx.Err() != nil {
			break
		}
		queue <- m
	}
	close(queue)
	wg.Wait()
}

// stage is one test command of the sweep and its per-mutant time limit.
type stage struct {
	args    []string
	timeout time.Duration
	kills   string // the status of a mutant this stage kills
}

// test compiles mutant m of f and runs the stages on it in turn, until
// one fails. Nothing in the module changes: the mutated file is written
// to the scratch directory and reaches the go command through -overlay.
func (r *runner) test(ctx context.Context, m *mutant, f *sourceFile, stages []stage) {
	dir, err := reachableTemp(r.scratch, fmt.Sprintf("m%d-", m.ID))
	if err != nil {
		m.Status, m.Detail = notRun, err.Error()
		return
	}
	defer os.RemoveAll(dir)
	mutated := filepath.Join(dir, path.Base(m.File))
	if err := os.WriteFile(mutated, m.apply(f), 0o644); err != nil {
		m.Status, m.Detail = notRun, err.Error()
		return
	}
	replace := map[string]string{filepath.Join(r.root, filepath.FromSlash(m.File)): mutated}
	build := []string{"go", "build", "./" + path.Dir(m.File)}
	if res := r.run(ctx, dir, replace, 10*time.Minute, build); !res.ok {
		// The compiler names the overlay's copy; the report names the file.
		m.Status, m.Detail = notCompiled, strings.ReplaceAll(res.failed, mutated, m.File)
		return
	}
	status, detail := survived, ""
	var flaky []string
	for _, s := range stages {
		res := r.run(ctx, dir, replace, s.timeout, s.args)
		if !res.ok && r.passesAgain(ctx, dir, replace, s, res) {
			// A flake is worth a look later, so keep what it said.
			said := ""
			if m := testLine.FindSubmatch(res.output); m != nil {
				said = fmt.Sprintf(" (%s)", m[1])
			}
			flaky = append(flaky, cmp.Or(res.failed, "timeout")+said)
			res.ok, res.timedOut = true, false
		}
		if ctx.Err() != nil {
			m.Status, m.Detail = notRun, "interrupted"
			return
		}
		if res.timedOut {
			status, detail = s.kills, "timeout"
			break
		}
		if !res.ok {
			status, detail = s.kills, res.failed
			break
		}
	}
	if len(flaky) > 0 {
		detail = strings.TrimPrefix(detail+"; flaky (failed, then passed when rerun): "+strings.Join(flaky, " "), "; ")
	}
	m.Status, m.Detail = status, detail
}

// passesAgain reruns what failed in stage s and reports whether it passes
// this time: only the tests that failed (a -run flag appended to a go
// test command overrides an earlier one), or the whole stage after a
// timeout. A test that fails under the load of two mutants at once (and
// whatever else the machine runs) but then passes did not kill the
// mutant; the report says it was flaky.
func (r *runner) passesAgain(ctx context.Context, dir string, replace map[string]string, s stage, failed result) bool {
	again := s.args
	if !failed.timedOut {
		if len(failed.tests) == 0 || len(s.args) < 2 || s.args[0] != "go" || s.args[1] != "test" {
			return false
		}
		again = append(slices.Clip(s.args), "-run", "^("+strings.Join(failed.tests, "|")+")$")
	}
	return r.run(ctx, dir, replace, s.timeout, again).ok && ctx.Err() == nil
}

// merge returns a copy of a with b's entries added.
func merge(a, b map[string]string) map[string]string {
	all := maps.Clone(a)
	if all == nil {
		all = map[string]string{}
	}
	maps.Copy(all, b)
	return all
}
