package experimenttest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"leases/evidence/command"
	"leases/testkit/testctx"
)

// CommittedResults is results.json as committed, at the root of the
// module leases.
func CommittedResults(t testing.TB) []byte {
	t.Helper()
	m := findModule()
	if m.err != nil {
		t.Fatal(m.err)
	}
	data, err := os.ReadFile(filepath.Join(m.dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// WriteFile writes content to name in dir and returns its path.
func WriteFile(t testing.TB, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// SmallBounds keep a run's exploration tiny, for tests of the command that
// are about where its output goes or how it is checked, not what it says.
var SmallBounds = []string{"--workers", "1", "--ttl", "1", "--last-tick", "1"}

// SmallRun is the document that a run with SmallBounds writes, made once
// for this test binary and shared by the tests that tamper with a document
// or write one somewhere odd: its rerun takes a fraction of a full run's
// time, since the exploration at the default bounds is the costliest part
// of the suite (under -race most of all). The full run is
// TestCommandReproducesResultsJSON's.
func SmallRun(t *testing.T) string {
	t.Helper()
	SkipWithoutStop(t)
	builtCommand(t) // outside the once: it may skip t
	small.once.Do(func() {
		code, doc, stderr := RunCommand(t, append(SmallBounds, "--output", "-")...)
		if code != command.ExitMatch || doc == "" {
			small.err = fmt.Errorf("a run with small bounds: exit %d, %d bytes; stderr:\n%s", code, len(doc), stderr)
			return
		}
		small.doc = doc
	})
	if small.doc == "" && small.err == nil {
		small.err = errors.New("the run with small bounds failed in another test")
	}
	if small.err != nil {
		t.Fatal(small.err)
	}
	return small.doc
}

var small struct {
	once sync.Once
	doc  string
	err  error
}

// CheckTampered runs the command with --check on content, and args, and
// returns its exit status and the last line it printed on stderr.
func CheckTampered(t *testing.T, content string, args ...string) (code int, lastLine string) {
	t.Helper()
	path := WriteFile(t, t.TempDir(), "tampered.json", content)
	args = append(args, "--check", path, "--output", filepath.Join(t.TempDir(), "out.json"))
	code, _, stderr := RunCommand(t, args...)
	return code, stderr[strings.LastIndex(strings.TrimSuffix(stderr, "\n"), "\n")+1:]
}

// RunCommand runs cmd/run-experiment, built once for this test binary (see
// builtCommand), as the README's command runs it: on SQLite and on etcd.
// Its --timeout is the test's hang bound (a case's own --timeout, later in
// args, wins).
func RunCommand(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut strings.Builder
	cmd := exec.CommandContext(testctx.Context(t), builtCommand(t), append([]string{"--timeout", testctx.Bound(t).String()}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("run-experiment: %v; stderr:\n%s", err, errOut.String())
	}
	return code, out.String(), errOut.String()
}

// RemoveBuiltCommand removes the command that builtCommand built, if it
// did: a TestMain whose tests run the command calls it after m.Run.
func RemoveBuiltCommand() {
	if commandDir != "" {
		_ = os.RemoveAll(commandDir)
	}
}

// The command, built once for all the tests of this binary, in a directory
// that RemoveBuiltCommand removes.
var (
	commandOnce  sync.Once
	commandDir   string
	commandPath  string
	commandBuild error
	// packageDir is where go test started the tests, before any test's
	// t.Chdir: the go command asked where the module is runs there,
	// whichever test asks first.
	packageDir, packageDirErr = os.Getwd()
)

// module is where the module leases is, and the workspace that joins the
// command's module to it ("" or "off" without one), as the go command
// that runs these tests says from the package's directory (go env).
type module struct {
	dir, gowork string
	err         error
}

var findModule = sync.OnceValue(func() module {
	if packageDirErr != nil {
		return module{err: packageDirErr}
	}
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "env", "GOMOD", "GOWORK")
	cmd.Dir = packageDir
	out, err := cmd.Output()
	if err != nil {
		return module{err: fmt.Errorf("go env GOMOD GOWORK: %w", err)}
	}
	gomod, gowork, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return module{dir: filepath.Dir(strings.TrimSpace(gomod)), gowork: strings.TrimSpace(gowork)}
})

// builtCommand builds ./cmd/run-experiment, a module of its own that the
// workspace (go.work) joins to this one, with the go command that runs
// these tests, and returns the binary's path. Without the workspace
// (GOWORK=off, or the root module copied alone, as a SQLite-only user
// has it) the command is not part of the build, and the tests that run it
// skip, saying so in one line.
func builtCommand(t testing.TB) string {
	t.Helper()
	commandOnce.Do(func() {
		m := findModule()
		if m.err != nil {
			commandBuild = m.err
			return
		}
		if m.gowork == "" || m.gowork == "off" {
			commandBuild = errNoWorkspace
			return
		}
		if commandDir, commandBuild = os.MkdirTemp("", "leases-command-"); commandBuild != nil {
			return
		}
		commandPath = filepath.Join(commandDir, "run-experiment")
		if runtime.GOOS == "windows" {
			commandPath += ".exe" // or Windows will not run it
		}
		build := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", commandPath, "./cmd/run-experiment")
		build.Dir = m.dir
		if out, err := build.CombinedOutput(); err != nil {
			commandBuild = fmt.Errorf("go build ./cmd/run-experiment: %w\n%s", err, out)
		}
	})
	if errors.Is(commandBuild, errNoWorkspace) {
		t.Skip(commandBuild)
	}
	if commandBuild != nil {
		t.Fatal(commandBuild)
	}
	return commandPath
}

// errNoWorkspace is why the command's tests skip outside the workspace.
var errNoWorkspace = errors.New("skipped: the command is a module of its own (cmd/run-experiment), built only in the repository's workspace (go.work)")
