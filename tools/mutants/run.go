package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
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
	scratch string // the sweep's temporary directory
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

// run runs args with the files of overlay (a go command -overlay file, or
// "" for none) in place, and kills it with all its descendants after
// timeout. A test that hangs is a test that failed: a mutant that makes it
// hang is killed, and the result says so.
func (r *runner) run(ctx context.Context, dir, overlay string, timeout time.Duration, args []string) result {
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
	if overlay != "" {
		goflags = strings.TrimSpace(goflags + " -overlay=" + overlay)
	}
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "GOTMPDIR="+gotmp, "GOFLAGS="+goflags)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// The suite starts worker processes: they share go test's process
	// group, and ending the group ends them all.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	err := cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // a straggler a mutant left behind
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
	panicLine = regexp.MustCompile(`(?m)^panic: .*`)
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
	dir, err := os.MkdirTemp(r.scratch, fmt.Sprintf("m%d-", m.ID))
	if err != nil {
		m.Status, m.Detail = notRun, err.Error()
		return
	}
	defer os.RemoveAll(dir)
	mutated := filepath.Join(dir, path.Base(m.File))
	overlay := filepath.Join(dir, "overlay.json")
	spec, _ := json.Marshal(map[string]map[string]string{
		"Replace": {filepath.Join(r.root, filepath.FromSlash(m.File)): mutated},
	})
	if err := errors.Join(os.WriteFile(mutated, m.apply(f), 0o644), os.WriteFile(overlay, spec, 0o644)); err != nil {
		m.Status, m.Detail = notRun, err.Error()
		return
	}
	build := []string{"go", "build", "./" + path.Dir(m.File)}
	if res := r.run(ctx, dir, overlay, 10*time.Minute, build); !res.ok {
		// The compiler names the overlay's copy; the report names the file.
		m.Status, m.Detail = notCompiled, strings.ReplaceAll(res.failed, mutated, m.File)
		return
	}
	status, detail := survived, ""
	var flaky []string
	for _, s := range stages {
		res := r.run(ctx, dir, overlay, s.timeout, s.args)
		if !res.ok && !res.timedOut && r.passesAgain(ctx, dir, overlay, s, res.tests) {
			flaky = append(flaky, res.failed)
			res.ok = true
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

// passesAgain reruns only the tests that failed in stage s (appending a
// -run flag, which overrides an earlier one, to a go test command) and
// reports whether they pass this time. A test that fails under the load of
// two mutants at once but then passes did not kill the mutant; the report
// says it was flaky.
func (r *runner) passesAgain(ctx context.Context, dir, overlay string, s stage, tests []string) bool {
	if len(tests) == 0 || len(s.args) < 2 || s.args[0] != "go" || s.args[1] != "test" {
		return false
	}
	again := append(slices.Clip(s.args), "-run", "^("+strings.Join(tests, "|")+")$")
	return r.run(ctx, dir, overlay, s.timeout, again).ok && ctx.Err() == nil
}
